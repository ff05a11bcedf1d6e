"""Reference tokenizers load offline from pinned packages, and our split regexes match tiktoken's."""

from __future__ import annotations

import dataclasses
import itertools
import sys

import pytest
import regex
import tiktoken_ext.openai_public as openai_public
from tokenizers import Regex, pre_tokenizers

from tests.services import FIXTURES
from tokenmill.errors import ReferenceFileError
from tokenmill.evaluation import references
from tokenmill.evaluation.references import REFERENCE_NAMES, load_reference, reference_sha256
from tokenmill.training import patterns
from tokenmill.training.patterns import PATTERNS

# Contractions in both cases, digit runs, CJK, emoji with modifiers and ZWJ, odd spaces,
# trailing whitespace, CRLF, punctuation runs, and case-folding traps for (?i:…)
# (long s, Kelvin sign, sharp s).
VARIED_TEXT = (
    "I'm sure they'LL say DON'T, you've 1234567 reasons… «¿Qué?» — 3.14159, 2024-05-01!!\n"
    "El niño juega en el jardín. Straße ſ 'ſ 'K 'ß naïve café\n"
    "你好，世界！今天是2024年。日本語のテキストです。한국어 문장입니다.\n"
    "Emoji: 😀👍🏽 🇪🇸 👨\u200d👩\u200d👧 ok\n"
    "def f(x):\n\tif x  >= 10_000:\n\t\treturn {'a': [1, 2]}  \n\n\n"
    "\u00a0non-breaking\u3000ideographic\u200bzero-width\x1cfile-sep\u0085nel\r\nwindows\r\n   \n"
    "Ελληνικά, русский текст, עברית, العربية, हिन्दी, ไทย   trailing   "
)
SAMPLES = ("code/python.txt", "fortunes/rus_Cyrl.txt", "debian_reference/jpn_Jpan.txt", "math_tex/eng_Latn.txt")
# Our names (references and training presets) → tiktoken_ext.openai_public constructor names.
TIKTOKEN_NAMES = {"gpt2": "r50k_base", "cl100k": "cl100k_base", "o200k": "o200k_base"}


@pytest.fixture
def fresh_cache():
    load_reference.cache_clear()
    yield
    load_reference.cache_clear()


@pytest.mark.parametrize(
    ("name", "spanish", "english"),
    [("gpt2", 12, 7), ("cl100k_base", 11, 7), ("o200k_base", 7, 7)],
)
def test_token_counts(name, spanish, english):
    enc = load_reference(name)
    assert len(enc.encode("El niño juega en el jardín.")) == spanish
    assert len(enc.encode("The boy plays in the garden.")) == english


def test_gpt2_is_read_without_importing_whisper():
    load_reference("gpt2")
    # Importing whisper would import torch, which is deliberately not installed.
    assert "whisper" not in sys.modules


@pytest.fixture
def tiktoken_definition(monkeypatch):
    """tiktoken's own definition of an encoding, minus the ranks its constructor would download."""
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
    return lambda name: openai_public.ENCODING_CONSTRUCTORS[TIKTOKEN_NAMES.get(name, name)]()


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_matches_tiktoken_definition(name, tiktoken_definition):
    definition = tiktoken_definition(name)
    enc = load_reference(name)
    specials = {token: enc.encode_single_token(token) for token in enc.special_tokens_set}
    assert specials == definition["special_tokens"]
    assert enc.n_vocab == {"gpt2": 50257, "cl100k_base": 100277, "o200k_base": 200019}[name]
    assert enc.decode(enc.encode(VARIED_TEXT)) == VARIED_TEXT
    # The encoding splits as tiktoken's pattern does: encoding the pieces one by one gives
    # what the encoding gives for the whole text (this also vouches for the `regex` module
    # standing in for tiktoken's regex engine in the split tests below).
    pieces = regex.findall(definition["pat_str"], VARIED_TEXT)
    assert [i for piece in pieces for i in enc.encode_ordinary(piece)] == enc.encode_ordinary(VARIED_TEXT)


def test_copied_patterns_are_tiktokens(tiktoken_definition):
    assert tiktoken_definition("cl100k_base")["pat_str"] == patterns.CL100K_PAT_STR
    assert tiktoken_definition("o200k_base")["pat_str"] == patterns.O200K_PAT_STR


def test_sha256_mismatch_fails_loudly(monkeypatch, fresh_cache):
    tampered = dataclasses.replace(references._REFERENCES["gpt2"], sha256="0" * 64)
    monkeypatch.setitem(references._REFERENCES, "gpt2", tampered)
    with pytest.raises(ReferenceFileError, match=r"gpt2\.tiktoken has sha256 306cd27f.*expected 0{64}"):
        load_reference("gpt2")


def test_missing_package_names_the_install_command(monkeypatch, fresh_cache):
    missing = dataclasses.replace(references._REFERENCES["o200k_base"], distribution="no-such-distribution")
    monkeypatch.setitem(references._REFERENCES, "o200k_base", missing)
    with pytest.raises(ReferenceFileError, match=r"pip install bpe-openai==0\.1\.4"):
        load_reference("o200k_base")


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="gpt2, cl100k_base, o200k_base"):
        load_reference("p50k_base")
    with pytest.raises(ValueError, match="valid names"):
        reference_sha256("r50k_base")


def test_reference_sha256_is_the_pinned_hash():
    pinned = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    assert reference_sha256("cl100k_base") == pinned


def _texts() -> list[str]:
    texts = [VARIED_TEXT]
    for relative in SAMPLES:
        with (FIXTURES / relative).open(encoding="utf-8") as handle:
            texts.append("".join(itertools.islice(handle, 300)))
    return texts


@pytest.mark.parametrize("preset", PATTERNS)
def test_oniguruma_split_matches_tiktoken_split(preset, tiktoken_definition):
    tiktoken_pattern = tiktoken_definition(preset)["pat_str"]
    split = pre_tokenizers.Split(Regex(PATTERNS[preset]), behavior="isolated")
    for text in _texts():
        expected = regex.findall(tiktoken_pattern, text)
        assert [piece for piece, _ in split.pre_tokenize_str(text)] == expected
        # The adapted pattern also reads the same in tiktoken's engine.
        assert regex.findall(PATTERNS[preset], text) == expected


def test_tiktoken_pattern_does_not_work_unchanged_in_oniguruma():
    # Why PATTERNS["cl100k"] differs from tiktoken's: "{1,3}+" is not possessive in Oniguruma.
    split = pre_tokenizers.Split(Regex(patterns.CL100K_PAT_STR), behavior="isolated")
    assert [piece for piece, _ in split.pre_tokenize_str("1234567")] == ["1234567"]
    assert regex.findall(patterns.CL100K_PAT_STR, "1234567") == ["123", "456", "7"]
