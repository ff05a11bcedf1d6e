"""The submission probe of a custom pre_tokenizer_regex: catastrophic patterns are refused
(tried with Oniguruma itself, in a sandbox process), the presets' patterns pass."""

import time

import pytest

from tokenmill.errors import InvalidInput
from tokenmill.sandboxed.regex_probe import pieces, probe_texts
from tokenmill.training.patterns import PATTERNS
from tokenmill.training.spec import REGEX_PROBE_REPEAT, resolve_spec

CATASTROPHIC = ["(b+)+c", "(a|a)*b", "(x+x+)+y", r"(ab)*(ab)*(ab)*(ab)*x", r"(\w+\s?)+$", r"(\p{L}+)+!"]


def custom(pattern: str) -> dict:
    return {"pre_tokenizer": "none", "pre_tokenizer_regex": pattern}


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_refused_at_submission(pattern):
    started = time.monotonic()
    with pytest.raises(InvalidInput) as refused:
        resolve_spec(custom(pattern))
    assert refused.value.field == "spec.pre_tokenizer_regex"
    assert "backtrack" in refused.value.detail
    assert time.monotonic() - started < 30  # bounded by the probe's limits, not by the pattern


@pytest.mark.parametrize("preset", sorted(PATTERNS))
def test_the_presets_patterns_pass(preset):
    spec = resolve_spec(custom(PATTERNS[preset]))
    assert spec.pre_tokenizer_regex == PATTERNS[preset]


@pytest.mark.parametrize("pattern", [r"\w+|[^\w\s]+|\s+", r"[A-Za-z]+|\d{1,3}|\s+|[^\sA-Za-z\d]+", r"\S+\n?|\s+"])
def test_ordinary_patterns_pass(pattern):
    assert resolve_spec(custom(pattern)).pre_tokenizer_regex == pattern


def test_probe_texts_are_derived_from_the_pattern():
    texts = probe_texts("(b+)+c", REGEX_PROBE_REPEAT)
    assert any(text.startswith("b" * REGEX_PROBE_REPEAT + "!") for text in texts)
    # The required literal follows the run: engines skip a search for `(a|a)*b` without a "b".
    assert all("b" in text[REGEX_PROBE_REPEAT:] for text in probe_texts("(a|a)*b", REGEX_PROBE_REPEAT))


def test_pieces_cover_escapes_properties_classes_and_literal_runs():
    found = pieces(r"(?:ab|\.)+[xy-]\s\p{Lu}\p{N}")
    assert {"a", "b", "ab", ".", "x", "y", " ", "A", "1"} <= set(found)
    assert "[" not in found and "(" not in found
