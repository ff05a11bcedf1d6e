"""JSON lines: every pathology is an InvalidCorpus naming the file and the line, in time linear in the line.

The same reading serves the upload (tokenmill/corpora/ingest.py) and training (`documents_of`),
so a line accepted once is read the same way everywhere.
"""

import pytest

from tests.unit.test_corpora_limits import Budget
from tokenmill.corpora.reading import MAX_JSON_DEPTH, document_of, documents_of
from tokenmill.errors import InvalidCorpus
from tokenmill.models import Corpus

GOOD = '{"text": "fine words"}'


def read(line: str, number: int = 7, text_field: str | None = None) -> str | None:
    return document_of(line, number, "jsonl", text_field)


def refused(line: str, number: int = 7) -> InvalidCorpus:
    with pytest.raises(InvalidCorpus) as caught:
        read(line, number)
    assert caught.value.field == "file", caught.value.detail
    assert f"line {number}" in caught.value.detail
    return caught.value


@pytest.mark.parametrize(("opening", "closing"), [("[", "]"), ('{"a": ', "}")])
def test_nesting_200000_deep_is_refused_at_once(opening, closing):
    budget = Budget(5.0)
    problem = refused('{"text": "x", "deep": ' + opening * 200_000 + closing * 200_000 + "}")
    budget.spend()
    assert f"more than {MAX_JSON_DEPTH} levels" in problem.detail


def test_nesting_is_refused_past_the_cap_exactly_whatever_the_interpreter_allows():
    def nested(depth: int) -> str:  # the line's object is one level, the value the rest
        return '{"text": "x", "n": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"

    assert read(nested(MAX_JSON_DEPTH)) == "x"
    assert "levels" in refused(nested(MAX_JSON_DEPTH + 1)).detail
    assert "levels" in refused('{"text": ' + "[" * 500 + "]" * 500 + "}").detail  # a text field too


def test_brackets_inside_strings_are_text():
    code = "[" * 100_000 + "{" * 100_000
    assert read(f'{{"text": "{code}"}}') == code


def test_a_million_digit_integer_is_refused_at_once():
    budget = Budget(5.0)
    problem = refused('{"text": "x", "n": ' + "7" * 1_000_000 + "}", number=3)
    budget.spend()
    assert "digits" in problem.detail


def test_a_long_decimal_costs_linear_time():
    budget = Budget(5.0)
    assert read('{"text": "x", "n": 0.' + "7" * 4_000_000 + "}") == "x"
    budget.spend()


@pytest.mark.parametrize(("line", "says"), [
    ('{"text": "unterminated}', "not valid JSON"),
    ('{"text": "x"} trailing', "not valid JSON"),
    ("[1, 2, 3]", "is an array, not a JSON object"),
    ('"just a string"', "is a string, not a JSON object"),
    ("42", "is a number, not a JSON object"),
    ("null", "is null, not a JSON object"),
    ('{"text": 5}', "field 'text' is a number, not a string"),
    ('{"text": null}', "field 'text' is null, not a string"),
    ('{"text": ["a", "b"]}', "field 'text' is an array, not a string"),
    ('{"text": {"a": "b"}}', "field 'text' is an object, not a string"),
    ('{"text": true}', "field 'text' is true, not a string"),
])
def test_every_line_that_holds_no_text_names_the_file_and_the_line(line, says):
    assert says in refused(line, number=12).detail


def test_a_missing_field_names_text_field_the_one_to_fix():
    with pytest.raises(InvalidCorpus) as caught:
        read('{"body": "x"}', 2)
    assert caught.value.field == "text_field" and "line 2" in caught.value.detail
    assert read('{"body": "x"}', 2, text_field="body") == "x"


def test_training_reads_the_same_refusals_with_the_same_line_numbers():
    corpus = Corpus(format="jsonl", text_field=None)
    data = (GOOD + "\n\n" + GOOD + "\n" + '{"text": "x", "n": ' + "[" * 5000 + "]" * 5000 + "}\n").encode()
    documents = documents_of([data], corpus)
    assert [next(documents), next(documents)] == ["fine words", "fine words"]
    with pytest.raises(InvalidCorpus, match="line 4 nests"):
        next(documents)
