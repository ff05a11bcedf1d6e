"""A spec the libraries cannot build is named before training (tokenmill.training.buildable): 1,000
special tokens of 195 characters are within the documented limits, and tiktoken cannot compile
the regex of them; an ordinary spec builds, with every library."""

import random
import string

import pytest

from tokenmill.training.buildable import SAFE_SPECIAL_BYTES, unbuildable
from tokenmill.training.spec import resolve_spec

LIBRARIES = [
    {"library": "tokenizers"},
    {"library": "tokenizers", "algorithm": "wordpiece"},
    {"library": "tokenizers", "algorithm": "unigram"},
    {"library": "tokenizers", "byte_level": False, "pre_tokenizer": "metaspace", "byte_fallback": True},
    {"library": "sentencepiece", "algorithm": "unigram"},
    {"library": "sentencepiece", "algorithm": "bpe"},
    {"library": "rustbpe"},
    {"library": "tokenmill"},
    {"library": "tokenmill", "pre_tokenizer": "none", "pre_tokenizer_regex": r"\w+|\s+|[^\w\s]+"},
]
IDS = ["bpe", "wordpiece", "unigram", "byte-fallback", "sp-unigram", "sp-bpe", "rustbpe", "tokenmill", "custom-regex"]
BYTE_LEVEL = {"bpe", "rustbpe", "tokenmill", "custom-regex"}  # the versions with a tokenizer.tiktoken


@pytest.fixture(autouse=True)
def resolved_unbuilt(monkeypatch):
    """resolve_spec builds each spec at submission (a sandbox call of unbuildable); here the
    specs are resolved without it, so that unbuildable itself is what is tried."""
    from tokenmill.training import spec

    monkeypatch.setattr(spec, "_check_buildable", lambda spec, owner: None)


def test_submission_refuses_what_cannot_be_built(monkeypatch):
    monkeypatch.undo()
    from tokenmill.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        resolve_spec({"vocab_size": 8000, "special_tokens": specials(1000)})
    assert refused.value.field == "spec.special_tokens" and "tiktoken" in refused.value.detail


def specials(count: int, length: int = 195) -> list[str]:
    """Distinct tokens of `length` ASCII characters, one byte each."""
    rng = random.Random(0)
    return ["".join(rng.choice(string.ascii_letters) for _ in range(length - len(str(i)))) + str(i) for i in range(count)]


@pytest.mark.parametrize("raw", LIBRARIES, ids=IDS)
def test_an_ordinary_spec_builds(raw):
    assert unbuildable(resolve_spec({"vocab_size": 8000, **raw})) is None


@pytest.mark.parametrize("raw", LIBRARIES, ids=IDS)
def test_a_thousand_special_tokens_of_195_characters_are_named_where_tiktoken_reads_the_version(raw, request):
    spec = resolve_spec({"vocab_size": 8000, **raw, "special_tokens": specials(1000)})  # within the limits
    found = unbuildable(spec.model_dump())  # as the sandbox calls it: with a dict
    if request.node.callspec.id not in BYTE_LEVEL:
        assert found is None  # no rank file: nothing reads them with tiktoken
        return
    assert found is not None
    field, reason = found
    assert field == "spec.special_tokens"
    assert reason.startswith("spec.special_tokens: the tokenizer cannot be built with these special tokens (tiktoken: ")
    assert "error building NFA" in reason and "these are 195,000: use fewer or shorter ones" in reason


def test_special_tokens_up_to_the_safe_size_build_and_the_threshold_is_where_it_was_measured():
    fits = SAFE_SPECIAL_BYTES // 195  # 769 tokens, 149,955 bytes
    assert unbuildable(resolve_spec({"special_tokens": specials(fits)})) is None
    assert unbuildable(resolve_spec({"special_tokens": specials(798, 195)})) is None  # 155,610 bytes: still builds
    assert unbuildable(resolve_spec({"special_tokens": specials(799, 195)})) is not None  # 155,805: does not


@pytest.mark.parametrize("library", ["rustbpe", "tokenmill"])
def test_a_special_token_spelled_like_a_byte_token_is_named(library):
    # rustbpe's files give "a" the id of the byte it spells: tiktoken and tokenizers would disagree.
    field, reason = unbuildable(resolve_spec({"library": library, "vocab_size": 1000, "special_tokens": ["a"]})) or ("", "")
    assert field == "spec.special_tokens" and "is also a learned token" in reason
