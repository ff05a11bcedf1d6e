"""The new-job form is built from TrainingSpec and posts what the API would: defaults, kinds, refusals."""

import pytest
from starlette.datastructures import FormData

from service.web.spec_form import HELP, form_values, spec_fields, spec_from_form
from tokenmill.errors import InvalidInput
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
