"""The compiled splitter (tokenmill.training.splitting) gives `regex.findall`'s pieces for the
three presets, and counts them as `spills.count` does. The whole shared corpora: the slow test
at the end (tests/regex_equality.py)."""

import io
import random
import re
from collections import Counter

import numpy as np
import pytest
import regex

from tests.regex_equality import CASES, compare, slices
from tests.services import CORPORA, FIXTURES
from tokenmill.training.counting import spills
from tokenmill.training.patterns import CL100K_PAT_STR, PATTERNS
from tokenmill.training.splitting import classes, classes_data, piece_table
from tokenmill.training.splitting.counting import (
    PieceCounter,
    compiled_preset,
    count,
    counted,
    counted_frames,
    counted_in_threads,
    preset_of,
    split,
)
from tokenmill.training.text_frames import batches, frames, write_texts

CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cn")
CONTRACTIONS = ("'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'rE", "'ve", "'VE", "'vE", "'m", "'M", "'ll", "'LL",
                "'lL", "'d", "'D", "'ſ", "'x", "'", "''s", "'sx", "'ll'", "'s'", "'dd", "'r", "'v", "'l")
SPACES = (" ", "  ", "   ", "\t", " \t ", "\xa0", "\u3000", "\u2028", "\x0b\x0c", "\x85", "\x1c", " \n", "\n ", "\n",
          "\n\n", "\r\n", "\r\n\r\n", "  \r\n  ", "\r", "\r\r\n", "\n\r", " \n \n ", "\t\n\t")
EMOJI = ("👨\u200d👩\u200d👧\u200d👦", "👍🏽", "👍🏿👍", "🇺🇸🇫🇷", "🏳\ufe0f\u200d🌈", "❤\ufe0f", "#\ufe0f\u20e3",
         "1\ufe0f\u20e3", "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", "🧑🏻\u200d💻", "😀😀")
MARKS = ("e\u0301", "E\u0301\u0302", "\u0301", " \u0301a", "\u0301'S", "क्षि", "ภาษาไทย", "שָׁלוֹם", "مَرْحَبًا", "1\u20e3",
         "Ǆǅǆ", "ʰʰa", "Aʰ", "aʰ", "ǅa", "Aǅ", "中a", "A中", "\u0301A", "\u0301a")


def category_samples(rng: random.Random) -> dict[str, list[str]]:
    """For each general category, its first and last code points (by `regex`) and a few between."""
    everything = "".join(map(chr, range(0x110000)))
    out = {}
    for category in CATEGORIES:
        found = [m.group() for m in regex.finditer(rf"\p{{{category}}}", everything)]
        out[category] = [found[0], found[-1], *rng.sample(found, min(8, len(found)))]
    return out


@pytest.fixture(scope="module")
def generated() -> list[str]:
    """Texts made to hit every rule of the three patterns (see the test below)."""
    rng = random.Random(22)
    samples = category_samples(rng)
    texts = []
    for base in ("", "it", "IT", "It", "Ǆ", "中", "é", "e\u0301", "1", " ", "x\u0301", "ʰ", "."):
        for suffix in CONTRACTIONS:
            for tail in ("", " ", "x", "X", "1", "'", "\n", "\u0301"):
                texts.append(base + suffix + tail)
    for n in range(1, 14):
        for digits in ("0" * n, "٣" * n, "½" * n, "Ⅻ" * n, ("12" * n)[:n]):
            for before in ("", " ", "a", "A", "-", "\n", "'", "x\u0301"):
                for after in ("", " ", "a", "%", "\n", "'s"):
                    texts.append(before + digits + after)
    for spaces in SPACES:
        for before in ("", "a", ".", "\n", "1"):
            for after in ("", "a", "A", "1", ".", "\n", "中", "\u0301", "'s", " a", "\r\n"):
                texts.append(before + spaces + after)
                texts.append(before + spaces + after + spaces)
    for mark in MARKS + EMOJI:
        for before in ("", " ", "a", "A", "'", "1", "\n"):
            for after in ("", " ", "a", "A", "'s", "'T", "1", "\n"):
                texts.append(before + mark + after)
    for _category, chars in samples.items():
        for char in chars:
            for before in ("", " ", "a", "A", "'", "1", "\n", "\u0301", "."):
                for after in ("", " ", "a", "A", "'s", "'LL", "1", "\n", "\u0301", "."):
                    texts.append(before + char + after)
    # Random mixes of all of it: the rules' interplay, which the lists above do not enumerate.
    pool = [c for chars in samples.values() for c in chars] + list(" \t\n\r\xa0\u3000's/SLDdtTmMvVeErR0½.-\u0301ǅʰ中")
    pieces = list(CONTRACTIONS + SPACES + EMOJI + MARKS)
    for _ in range(40_000):
        parts = [rng.choice(pool) if rng.random() < 0.8 else rng.choice(pieces) for _ in range(rng.randint(0, 20))]
        texts.append("".join(parts))
    assert not any(re.search("[\ud800-\udfff]", text) for text in texts)  # valid str: what a corpus gives
    return texts


@pytest.mark.parametrize("case", CASES)
def test_generated_texts_split_as_regex(generated, case):
    # Every general category (its first, last and random code points, between letters, marks,
    # digits, spaces, apostrophes), every contraction in upper, lower and mixed case, digit runs
    # of 1-13, whitespace runs before letters, at the end and around \r\n, combining marks, emoji
    # sequences (ZWJ, skin tones, flags, keycaps, tags), and 40,000 random mixes.
    preset, pattern = CASES[case]
    compared = compare(generated, preset, pattern)
    assert compared.mismatch is None, compared.mismatch
    assert compared.pieces > 200_000


@pytest.fixture(scope="module")
def every_code_point() -> list[str]:
    """Every code point between its neighbours (runs of 48 in a row); and, for each of the
    splitter's classes, its first, last and 30 random code points in many contexts (the
    scanners see nothing of a character but its class)."""
    points = [point for point in range(0x110000) if not 0xD800 <= point < 0xE000]
    texts = ["".join(map(chr, points[at:at + 48])) for at in range(0, len(points), 48)]
    index, rows = classes.table()
    of_point = rows[index[np.array(points) >> 8], np.array(points) & 0xFF]
    rng = random.Random(17)
    for value in np.unique(of_point):
        members = [points[k] for k in np.flatnonzero(of_point == value)]
        for char in map(chr, {members[0], members[-1], *rng.sample(members, min(30, len(members)))}):
            texts += [f"{before}{char}{after}" for before in ("", " ", "a", "A", "'", "1", "\n", "\u0301", ".", "ǅ")
                      for after in ("", " ", "a", "A", "'s", "'LL", "1", "\n", "\u0301", ".", char, "  x", "/")]
    return texts


@pytest.mark.large
@pytest.mark.parametrize("case", CASES)
def test_every_code_point_splits_as_regex(every_code_point, case):
    preset, pattern = CASES[case]
    compared = compare(every_code_point, preset, pattern)
    assert compared.mismatch is None, compared.mismatch
    assert compared.characters > 1_100_000


@pytest.mark.large
@pytest.mark.parametrize("case", CASES)
def test_corpus_excerpts_split_as_regex(case):
    # tests/corpora: 21 FLORES languages, code, man pages, TeX, fortunes, Quijote, Japanese;
    # their lines (what training counts) and 64 KB slices (documents of many lines).
    preset, pattern = CASES[case]
    compared_characters = 0
    for path in sorted(FIXTURES.rglob("*.txt")):
        text = path.read_text(encoding="utf-8")
        for texts in (text.split("\n"), slices(text)):
            compared = compare(texts, preset, pattern)
            assert compared.mismatch is None, f"{path}: {compared.mismatch}"
            compared_characters += compared.characters
    assert compared_characters > 8_000_000


def test_lone_surrogates_split_as_regex():
    # A corpus never holds one, but a str may, and texts cross a child's pipe "surrogatepass".
    texts = ["a\ud800b", "\udfff's", " \ud83d", "1\udc00 x", "\ud800\udc00"]
    for preset, pattern in CASES.values():
        assert [split(text, preset) for text in texts] == [regex.findall(pattern, text) for text in texts]


@pytest.mark.large
def test_a_mistake_in_a_scanner_is_caught(monkeypatch, generated):
    # The comparison is not vacuous: the splitter with its class table off by one bit fails it.
    from tokenmill.training.splitting import counting

    index, rows = counting._table()
    broken = rows.copy()
    broken[index[ord("ſ") >> 8], ord("ſ") & 0xFF] &= ~np.uint16(classes.FOLD_MASK)  # forget that ſ is an s
    monkeypatch.setattr(counting, "_table", lambda: (index, broken))
    assert compare(generated, "cl100k", PATTERNS["cl100k"]).mismatch is not None
    assert compare(generated, "gpt2", PATTERNS["gpt2"]).mismatch is None  # gpt2's 's is case-sensitive


def test_preset_of():
    assert {preset_of(pattern) for pattern in PATTERNS.values()} == {"gpt2", "cl100k", "o200k"}
    assert preset_of(CL100K_PAT_STR) == "cl100k"
    assert preset_of(PATTERNS["gpt2"] + "|x") is None and preset_of(r"\w+") is None


def pieces_of(arrays) -> Counter[bytes]:
    lengths, counts, data = arrays
    assert lengths.dtype == counts.dtype == np.int64 and data.dtype == np.uint8  # what a counting child sends
    assert int(lengths.sum()) == len(data) and (lengths > 0).all() and (counts > 0).all()
    out: Counter[bytes] = Counter()
    raw, at = data.tobytes(), 0
    for length, seen in zip(lengths.tolist(), counts.tolist()):
        out[raw[at:at + length]] += seen
        at += length
    return out


@pytest.fixture(scope="module")
def documents() -> list[str]:
    """Every third line of tests/corpora (2.7 MB, every language), and 150,000 distinct words of
    one to 28 letters, so the table grows several times."""
    text = "".join(path.read_text(encoding="utf-8") for path in sorted(FIXTURES.rglob("*.txt")))
    rng = random.Random(5)
    words = [" ".join("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 28))) for _ in range(30))
             for _ in range(5000)]
    return text.split("\n")[::3] + words


@pytest.mark.large
@pytest.mark.parametrize("preset", ["gpt2", "cl100k", "o200k"])
def test_counts_are_spills_count(documents, preset):
    expected = spills.count(documents, spills.split_by(PATTERNS[preset], None))
    counter = counted(documents, preset)
    assert len(counter) == len(expected) > 150_000  # each piece once
    assert counter.counter() == expected
    assert pieces_of(counter.arrays()) == {piece.encode(): seen for piece, seen in expected.items()}


@pytest.mark.large
def test_counting_in_batches_frames_and_threads_gives_the_same(documents):
    expected = pieces_of(counted(documents, "o200k").arrays())
    one_by_one = PieceCounter("o200k")
    for document in documents[:2000]:
        one_by_one.add([document])
    one_by_one.add(documents[2000:])
    assert pieces_of(one_by_one.arrays()) == expected
    stream = io.BytesIO()
    for batch in batches(documents):
        write_texts(stream, batch)
    stream.seek(0)
    assert pieces_of(counted_frames(frames(stream), "o200k").arrays()) == expected
    assert pieces_of(counted_in_threads(documents, "o200k", 3)) == expected
    assert pieces_of(counted_in_threads(iter([]), "o200k", 2)) == Counter()


def test_a_failing_thread_fails_the_count():
    with pytest.raises(TypeError):
        counted_in_threads(["fine", 17, "text"] * 100_000, "gpt2", 2)  # type: ignore[list-item]


def test_equal_codes_of_different_pieces_are_kept_apart():
    # Long pieces are told apart by their bytes when their codes are equal: give three pieces
    # (9, 9 and 17 bytes, differing in their first or middle bytes) one code.
    pieces = [b"abcdefghi", b"Xbcdefghi", b"abcdefghi", b"0123456789abcdefg", b"0123456789Xbcdefg"]
    data = np.frombuffer(b"".join(pieces) + bytes(piece_table.WORD), dtype=np.uint8).copy()
    ends = np.cumsum([len(piece) for piece in pieces]).astype(np.int64)
    codes = np.full(len(pieces), 1 << 62, dtype=np.int64)
    rows, numbers = np.zeros((16, 2), dtype=np.int64), np.zeros(16, dtype=np.int32)
    starts, keys, sizes = np.zeros(9, dtype=np.int64), np.zeros(128, dtype=np.uint8), np.zeros(2, dtype=np.int64)
    at = np.zeros(1, dtype=np.int64)
    once = np.zeros(0, dtype=np.int64)
    assert piece_table.count(data, ends, codes, once, at, rows, numbers, starts, keys, sizes) == piece_table.DONE
    assert sizes[0] == 4 and sorted(rows[rows[:, 0] != 0, 1].tolist()) == [1, 1, 1, 2]


@pytest.mark.large
def test_count_is_spills_count_compiled_for_the_presets(documents):
    for pattern in PATTERNS.values():
        split_by = spills.split_by(pattern, None)
        assert compiled_preset(split_by) == preset_of(pattern)  # what a counting child passes is recognized
        assert count(documents[:3000], split_by) == spills.count(documents[:3000], split_by)
    # Not a preset's split: counted by spills.count, which is what comes back.
    from tokenizers import normalizers

    for split_by in (spills.split_by(r"\w+|\s+|[^\w\s]+", None),
                     spills.split_by(PATTERNS["gpt2"], None, 10.0),  # a time limit: a custom regex's only
                     spills.split_by(PATTERNS["gpt2"], normalizers.NFKC()),
                     regex.compile(PATTERNS["gpt2"], regex.IGNORECASE).findall):
        assert compiled_preset(split_by) is None
        assert count(documents[:500], split_by) == spills.count(documents[:500], split_by)


def test_the_classes_are_what_regex_gives():
    # classes_data.py is reproducible: generated again from the installed regex, byte for byte.
    assert classes.source(classes.generated()) == classes.DATA.read_text()
    assert regex.__version__ == classes_data.REGEX_VERSION


def test_another_regex_version_refuses_the_classes(monkeypatch):
    monkeypatch.setattr(classes_data, "REGEX_VERSION", "2020.1.1")
    with pytest.raises(RuntimeError, match="regenerate them"):
        classes.table()


@pytest.mark.slow
def test_the_shared_corpora_split_as_regex():
    # Every file of ../shared/corpora (758, 125 million characters), read whole, its lines as
    # documents, the three presets. `python -m tests.regex_equality` adds the files' 64 KB
    # slices (documents of many lines) and tiktoken's own cl100k pattern.
    import subprocess
    import sys

    from tests.services import REPO

    assert CORPORA.is_dir()
    done = subprocess.run([sys.executable, "-m", "tests.regex_equality", "--modes", "lines", "--cases", "gpt2", "cl100k",
                           "o200k"], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " 0 differ" in done.stdout


@pytest.mark.large
@pytest.mark.parametrize("preset", ["gpt2", "cl100k", "o200k"])
def test_the_splitters_counts_learn_library_tokenmills_tokenizer(documents, preset):
    # What the integration promises: the same merges, so byte-identical files.
    from tokenmill.training.merge_learner import learn_merges_of
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.with_rustbpe import to_tokenizer
    from tokenmill.training.with_tokenmill import merges_wanted, train_tokenmill

    texts = documents[:20_000]
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 1500, "pre_tokenizer": preset,
                         "special_tokens": ["<|endoftext|>"]})
    lengths, counts, data = counted_in_threads(texts, preset_of(spec.regex_pattern), 2)
    ours = to_tokenizer(spec, learn_merges_of(data, lengths, counts, merges_wanted(spec)))
    assert ours.to_str() == train_tokenmill(spec, texts, processes=2).to_str()
