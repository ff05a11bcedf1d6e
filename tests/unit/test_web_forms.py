"""The new-job form is built from TrainingSpec and posts what the API would: defaults, kinds, refusals,
the usual fields first, a stored spec filled in, and what the job will do said before it is submitted."""

import uuid
from typing import ClassVar

import pytest
from starlette.datastructures import FormData

from service.web.job_advice import advice, vocabulary_ceiling
from service.web.spec_form import BASIC, HELP, changed_advanced, form_values, spec_fields, spec_from_form, spec_values
from tokenmill.errors import InvalidInput
from tokenmill.models import Corpus
from tokenmill.training.spec import TrainingSpec, resolve_spec


def test_every_spec_field_is_in_the_form_with_a_line_of_help():
    fields = spec_fields()
    assert [f.name for f in fields] == list(TrainingSpec.model_fields)
    assert all(f.help and "\n" not in f.help for f in fields)
    assert set(HELP) == set(TrainingSpec.model_fields)


def test_field_kinds_defaults_and_bounds_come_from_the_model():
    fields = {f.name: f for f in spec_fields()}
    assert fields["algorithm"].kind == "choice" and fields["algorithm"].choices == ("bpe", "wordpiece", "unigram")
    assert fields["pre_tokenizer"].kind == "choice" and fields["pre_tokenizer"].optional
    assert fields["byte_level"].kind == "bool" and fields["byte_level"].optional
    assert fields["lowercase"].kind == "bool" and not fields["lowercase"].optional
    assert (fields["vocab_size"].kind, fields["vocab_size"].default, fields["vocab_size"].minimum) == ("int", 32000, 1)
    assert fields["character_coverage"].kind == "float" and fields["character_coverage"].maximum == 1
    assert fields["special_tokens"].kind == "lines"
    assert fields["pre_tokenizer_regex"].kind == "text" and fields["pre_tokenizer_regex"].display_default() == ""


def test_the_untouched_form_means_the_default_spec():
    fields = spec_fields()
    values = form_values(fields, None)
    form = FormData([(f.input_name, values[f.name]) for f in fields if not (f.kind == "bool" and not f.optional)])
    assert resolve_spec(spec_from_form(fields, form)) == resolve_spec({})


def test_posted_values_become_the_spec_the_api_would_get():
    form = FormData([("spec.vocab_size", "800"), ("spec.lowercase", "true"), ("spec.byte_level", ""),
                     ("spec.special_tokens", "<s>\n\n </s> \n"), ("spec.pre_tokenizer_regex", "  ")])
    spec = spec_from_form(spec_fields(), form)
    assert spec["vocab_size"] == "800" and spec["lowercase"] == "true" and spec["special_tokens"] == ["<s>", "</s>"]
    assert "byte_level" not in spec and "pre_tokenizer_regex" not in spec
    assert spec["split_digits"] == "false"  # an unticked checkbox
    assert resolve_spec(spec).vocab_size == 800


@pytest.mark.parametrize(("name", "value", "field"), [("vocab_size", "lots", "spec.vocab_size"),
                                                      ("vocab_size", "100", "spec.vocab_size"),
                                                      ("character_coverage", "0", "spec.character_coverage")])
def test_refusals_name_the_input_that_holds_the_value(name, value, field):
    with pytest.raises(InvalidInput) as refused:
        resolve_spec(spec_from_form(spec_fields(), FormData([(f"spec.{name}", value)])))
    assert refused.value.field == field
    assert next(f for f in spec_fields() if f.name == name).input_name == field


def test_the_form_shows_the_usual_choices_first_and_folds_the_rest():
    fields = spec_fields()
    basic = [f.name for f in fields if f.basic]
    assert set(basic) == set(BASIC) <= set(TrainingSpec.model_fields)
    assert "vocab_size" in basic and "parity" in basic and "min_frequency" not in basic
    values = form_values(fields, None)
    assert not changed_advanced(fields, values)
    assert changed_advanced(fields, {**values, "min_frequency": "5"})
    assert not changed_advanced(fields, {**values, "vocab_size": "500"})  # a basic field


def test_a_stored_spec_fills_the_form_as_its_own_values():
    spec = resolve_spec({"vocab_size": 800, "parity": True, "special_tokens": ["<s>", "</s>"]}).model_dump()
    values = spec_values(spec_fields(), {**spec, "parity": False})
    assert values["vocab_size"] == "800" and values["parity"] == "false" and values["special_tokens"] == "<s>\n</s>"
    assert values["pre_tokenizer_regex"] == "" and values["byte_level"] == "true"
    form = FormData([(f"spec.{name}", value) for name, value in values.items() if value not in ("", "false")])
    assert resolve_spec(spec_from_form(spec_fields(), form)) == resolve_spec({**spec, "parity": False})


def corpus(size: int, words: int | None, characters: int, distinct: int | None, group: str | None = None,
           language: str = "eng_Latn") -> Corpus:
    return Corpus(id=uuid.uuid4(), name="c", domain="news", language=language, bytes=size, words=words,
                  characters=characters, lines=10, parallel_group=group, format="text", sha256=uuid.uuid4().hex,
                  storage_key=language, statistics={"distinct_words": distinct} if distinct is not None else None)


class Texts:
    """A store holding one text per language (the corpora's storage keys above)."""

    TEXTS: ClassVar[dict[str, str]] = {"eng_Latn": "The boy plays in the garden.\n", "deu_Latn": "Der Junge spielt im Garten.\n",
             "hin_Deva": "लड़का बगीचे में खेलता है।\n" * 30}

    def iter_chunks(self, key, chunk_size=0, start=0):
        yield self.TEXTS[key].encode()


def test_the_vocabulary_estimate_follows_distinct_words_or_size():
    assert vocabulary_ceiling([corpus(26_000, 4_000, 25_000, 2_077)]) == 1800  # 0.85 per distinct word
    chinese = corpus(60_000, 460, 20_000, 450, language="zho_Hans")  # a "word" is a sentence: by size instead
    assert vocabulary_ceiling([chinese]) == round(9 * 60_000**0.55, -2)
    assert vocabulary_ceiling([corpus(26_000, 4_000, 25_000, None)]) == round(9 * 26_000**0.55, -2)  # no statistics yet


def test_the_advice_says_what_the_job_will_do():
    small = [corpus(26_000, 4_000, 25_000, 2_077, "g"), corpus(30_000, 4_100, 29_000, 2_300, "g", "deu_Latn")]
    notes = {a.key: a for a in advice(Texts(), {"vocab_size": "32000"}, small)}
    assert notes["vocabulary"].kind == "warn" and "will likely stop near 3,700" in notes["vocabulary"].text
    assert notes["alphabet"].kind == "info" and "parity would give them closer" in notes["parity"].text
    assert "split" not in notes
    notes = {a.key: a for a in advice(Texts(), {"vocab_size": "1000", "parity": "true"}, small[:1])}
    assert notes["vocabulary"].kind == "info" and notes["parity"].kind == "warn"
    hindi = [corpus(80_000, 9_000, 50_000, 4_000, language="hin_Deva")]
    assert "cuts 100% of hin_Deva words at combining marks" in {a.key: a for a in advice(Texts(), {}, hindi)}["split"].text
    assert "split" not in {a.key for a in advice(Texts(), {"pre_tokenizer": "o200k"}, hindi)}
    refused = advice(Texts(), {"vocab_size": "lots"}, small)
    assert [a.key for a in refused] == ["refused"] and "spec.vocab_size" in refused[0].text
    assert [a.key for a in advice(Texts(), {}, [])] == ["summary", "corpora"]
