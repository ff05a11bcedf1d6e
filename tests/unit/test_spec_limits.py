"""The spec's bounds: every number has a ceiling, every string is text, special tokens are few and short."""

import math

import pytest

from tokenmill.errors import InvalidInput
from tokenmill.training.spec import TrainingSpec, resolve_spec

MAX_SPECIAL_TOKENS, MAX_SPECIAL_TOKEN_CHARS = 1000, 200  # the documented limits (README, "Limits")

INT_FIELDS = [name for name, info in TrainingSpec.model_fields.items() if "int" in str(info.annotation)]
# A spec the string fields below are valid in (end_of_word_suffix needs character-level bpe on whitespace).
SUFFIX_SPEC = {"byte_level": False, "pre_tokenizer": "whitespace", "vocab_size": 1000}


def refusal(raw: dict) -> InvalidInput:
    """The refusal of a spec, checked to be short and printable whatever the input held."""
    with pytest.raises(InvalidInput) as refused:
        resolve_spec(raw)
    detail = refused.value.detail
    assert len(detail) < 300 and detail.encode("utf-8"), detail  # never echoes the input
    return refused.value


def test_every_integer_field_has_a_ceiling():
    assert set(INT_FIELDS) >= {"vocab_size", "min_frequency", "max_token_length", "max_sentences", "seed"}
    for name in INT_FIELDS:
        bounds = [item for item in TrainingSpec.model_fields[name].metadata if hasattr(item, "le")]
        assert bounds and bounds[0].le < 2**63, name


@pytest.mark.parametrize("name", INT_FIELDS)
@pytest.mark.parametrize("value", [1e23, 10**30, 2**63, math.inf, -1e23, 2.5])
def test_out_of_range_integers_are_refused_naming_the_field(name, value):
    assert refusal({name: value}).field == f"spec.{name}"


def test_integers_at_their_ceiling_are_taken():
    spec = resolve_spec({"min_frequency": 2**31 - 1, "max_sentences": 2**31 - 1, "seed": 2**31 - 1})
    assert (spec.min_frequency, spec.max_sentences, spec.seed) == (2**31 - 1,) * 3
    assert resolve_spec({"min_frequency": 1e3}).min_frequency == 1000  # a whole float is still a number


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e23])
def test_character_coverage_must_be_a_finite_share(value):
    assert refusal({"character_coverage": value}).field == "spec.character_coverage"


@pytest.mark.parametrize(("raw", "field"), [
    ({"pre_tokenizer": "none", "pre_tokenizer_regex": "\\w+\x00"}, "spec.pre_tokenizer_regex"),
    ({"pre_tokenizer": "none", "pre_tokenizer_regex": "\\w+|\ud800"}, "spec.pre_tokenizer_regex"),
    ({**SUFFIX_SPEC, "end_of_word_suffix": "</w>\x00"}, "spec.end_of_word_suffix"),
    ({**SUFFIX_SPEC, "end_of_word_suffix": "\udfff"}, "spec.end_of_word_suffix"),
])
def test_strings_with_nul_or_lone_surrogates_are_refused_naming_the_field(raw, field):
    assert refusal(raw).field == field


def test_the_same_strings_without_them_are_taken():
    assert resolve_spec({"pre_tokenizer": "none", "pre_tokenizer_regex": "\\w+|\\s+"}).pre_tokenizer_regex
    assert resolve_spec({**SUFFIX_SPEC, "end_of_word_suffix": "</w>"}).end_of_word_suffix == "</w>"


@pytest.mark.parametrize("tokens", [
    ["<s>", "x" * 20 * 1024**2],  # a 20 MB token
    [f"<t{i}>" for i in range(150_000)],  # 150k tokens
    [f"<t{i}>" for i in range(MAX_SPECIAL_TOKENS + 1)],
    ["<s>", "x" * (MAX_SPECIAL_TOKEN_CHARS + 1)],
    ["<s>", "a\x00b"], ["\ud800"], ["<s>", "line\nbreak"], ["tab\there"], ["del\x7f"], ["c1\x85"],
])
def test_too_many_too_long_or_unprintable_special_tokens_are_refused(tokens):
    assert refusal({"special_tokens": tokens}).field == "spec.special_tokens"


def test_special_tokens_at_the_limits_are_taken():
    many = [f"<t{i}>" for i in range(MAX_SPECIAL_TOKENS)]
    assert resolve_spec({"special_tokens": many, "vocab_size": 32000}).special_tokens == many
    long = ["<|" + "y" * (MAX_SPECIAL_TOKEN_CHARS - 4) + "|>", "<|日本語|>", "<\u200d>"]
    assert resolve_spec({"special_tokens": long}).special_tokens == long


def test_reserved_special_tokens_follow_the_named_ones_with_stable_ids():
    from tokenmill.training import with_tokenizers
    from tokenmill.training.spec import resolve_spec

    spec = resolve_spec({"vocab_size": 400, "special_tokens": ["<s>", "</s>"], "reserved_special_tokens": 3})
    assert spec.special_tokens == ["<s>", "</s>", "<|reserved_0|>", "<|reserved_1|>", "<|reserved_2|>"]
    tokenizer = with_tokenizers.train(spec, ["a few words to train on", "and a few more words"] * 20)
    assert [tokenizer.token_to_id(t) for t in spec.special_tokens] == [0, 1, 2, 3, 4]
    default = resolve_spec({"vocab_size": 400, "reserved_special_tokens": 2})
    assert default.special_tokens == ["<|endoftext|>", "<|reserved_0|>", "<|reserved_1|>"]


def test_reserved_special_tokens_count_against_the_limit():
    import pytest

    from tokenmill.errors import InvalidInput
    from tokenmill.training.spec import resolve_spec

    with pytest.raises(InvalidInput) as refused:
        resolve_spec({"vocab_size": 5000, "special_tokens": ["<|reserved_0|>"], "reserved_special_tokens": 1})
    assert refused.value.field == "spec.special_tokens"
    with pytest.raises(InvalidInput) as refused:
        resolve_spec({"vocab_size": 5000, "reserved_special_tokens": 1000})
    assert refused.value.field == "spec.special_tokens"  # 1,001 with <|endoftext|>
