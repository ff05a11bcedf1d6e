"""Counting text a chunk at a time gives exactly the per-line counts and errors it replaced.

`per_line` below is the per-line path as it was (LineSplitter.feed, `document_of`, then
`len(document.split())` and `len(document)` for each document), restated in a few lines:
every test holds the chunk path (`LineSplitter.feed_bytes` into `TextCounts`) equal to it,
counts and refusals alike, on random text built to break it, cut at random places (multi-byte
characters across chunk boundaries), and on the real corpora.
"""

import random
import sys

import pytest

from tests.services import FIXTURES
from tokenmill.corpora.reading import LineSplitter
from tokenmill.corpora.text_counts import (
    ASCII_SPACES,
    LEAD2,
    LEADS3,
    MULTIBYTE_SPACES,
    SCRATCH_BYTES,
    TextCounts,
    count_block,
)
from tokenmill.errors import InvalidCorpus

SPACES = [chr(code) for code in range(sys.maxunicode + 1) if chr(code).isspace()]
# Characters that share lead bytes (C2, E1, E2, E3) and even second bytes with the spaces, but are not space.
LOOKALIKES = ["\xa1", "\x84", "\x86", "\u1681", "\u167f", "\u200b", "\u200c", "\u2010", "\u2027", "\u202a", "\u202e",
              "\u2030", "\u205e", "\u2060", "\u3001", "\u3002", "\u3041", "\u2fff"]
OTHERS = ["a", "Z", "0", ".", "é", "ж", "ع", "क", "日", "語", "😀", "𝔸", "\u0301", "\x00", "\x07", "\x1b", "\x7f"]
ALPHABET = SPACES + LOOKALIKES + OTHERS + ["\r", "\n", "\r\n", "\n\n", " \n", "\r\r\n", "\n \t\n"]
# Byte sequences that are not UTF-8: stray continuation, overlong, surrogate, beyond U+10FFFF, cut short.
INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf0\x80\x80\x80",
           b"\xf4\x90\x80\x80", b"\xf5", b"\xff", b"\xe6\x97", b"\xf0\x9f\x98", b"\xc2"]


def per_line(pieces: list[bytes], cap: int | None = None) -> tuple[int, int, int] | str:
    """The per-line counts (documents, words, characters), or the refusal's message, as the old path gave them."""
    held, line_number, lines, words, characters = b"", 0, 0, 0, 0
    for piece in [*pieces, None]:
        chunk, final = piece or b"", piece is None
        if cap is not None and len(held) + len(chunk) > cap:  # the length check comes first, per chunk
            for index, part in enumerate(chunk.split(b"\n")):
                if len(part) + (len(held) if index == 0 else 0) > cap:
                    return f"line {line_number + index + 1} is longer than {cap} bytes (the limit, " \
                           "TOKENMILL_MAX_LINE_BYTES)"
        data = held + chunk
        end = len(data) if final else data.rfind(b"\n") + 1
        complete, held = data[:end], data[end:]
        try:
            text = complete.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = line_number + complete.count(b"\n", 0, exc.start) + 1
            return f"invalid UTF-8 in line {line}: {exc.reason}"
        split = text.split("\n")
        if split[-1] == "":
            split.pop()
        line_number += len(split)
        for line in split:
            document = line[:-1] if line.endswith("\r") else line
            if document.strip():
                lines, words, characters = lines + 1, words + len(document.split()), characters + len(document)
    return lines, words, characters


def by_chunk(pieces: list[bytes], cap: int | None = None) -> tuple[int, int, int] | str:
    """The same through the chunk path that uploads take."""
    splitter, counts = LineSplitter(max_line_bytes=cap), TextCounts()
    try:
        for piece in pieces:
            for block in splitter.feed_bytes(piece):
                counts.add(block)
        for block in splitter.feed_bytes(b"", final=True):
            counts.add(block)
    except InvalidCorpus as exc:
        assert exc.field == "file"
        return exc.detail
    return counts.lines, counts.words, counts.characters


def cut(data: bytes, rng: random.Random) -> list[bytes]:
    """The data in pieces of random sizes, mostly small (so characters and lines are cut anywhere)."""
    pieces, start = [], 0
    while start < len(data):
        size = rng.choice([1, 2, 3, rng.randrange(1, 16), rng.randrange(1, 200), 4096])
        pieces.append(data[start:start + size])
        start += size
    return pieces


def random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(length)))


def test_the_whitespace_is_pythons():
    assert set(ASCII_SPACES.decode() + "".join(s.decode() for s in MULTIBYTE_SPACES)) == set(SPACES)
    assert len(SPACES) == 29
    assert {s[0] for s in MULTIBYTE_SPACES if len(s) == 2} == {LEAD2}
    assert {s[0] for s in MULTIBYTE_SPACES if len(s) == 3} == set(LEADS3)
    assert all(len(s) in (2, 3) for s in MULTIBYTE_SPACES)


@pytest.mark.parametrize("code", range(128))
def test_every_ascii_byte_is_space_or_not_as_python_says(code):
    line = f"a{chr(code)}b{chr(code)}\n".encode()
    expected = per_line([line])
    assert count_block(line) == expected, hex(code)


def test_random_text_cut_anywhere_counts_the_same():
    rng = random.Random(12)
    for _ in range(3000):
        data = random_text(rng, 80).encode()
        pieces = cut(data, rng)
        assert by_chunk(pieces) == per_line(pieces), (data, pieces)


def test_long_random_text_in_large_chunks_counts_the_same():
    # Whole blocks of thousands of lines, as uploads see them (1 MiB chunks), with every kind of line.
    rng = random.Random(5)
    for _ in range(5):
        data = "".join(random_text(rng, 60) + rng.choice(["\n", "\r\n", "\n\n", " \u3000\n"])
                       for _ in range(5000)).encode()
        for size in (len(data), 65536, 4097):
            pieces = [data[i:i + size] for i in range(0, len(data), size)]
            assert by_chunk(pieces) == per_line(pieces)


def test_invalid_utf8_is_refused_with_the_same_line_and_reason():
    rng = random.Random(3)
    refused = 0
    for _ in range(3000):
        parts = [random_text(rng, 12).encode() for _ in range(rng.randrange(1, 6))]
        data = b"".join(part + (rng.choice(INVALID) if rng.random() < 0.5 else b"") for part in parts)
        pieces = cut(data, rng)
        expected = per_line(pieces)
        assert by_chunk(pieces) == expected, (data, pieces)
        refused += isinstance(expected, str)
    assert refused > 1000  # the refusals were tested, not only the counts


def test_the_line_cap_is_refused_with_the_same_line():
    rng = random.Random(9)
    refused = 0
    for _ in range(3000):
        cap = rng.randrange(1, 40)
        data = (random_text(rng, 100) + "\n" * rng.randrange(2)).encode()
        pieces = cut(data, rng)
        expected = per_line(pieces, cap)
        assert by_chunk(pieces, cap) == expected, (data, pieces, cap)
        refused += isinstance(expected, str)
    assert refused > 500


def test_an_unfinished_line_is_refused_as_soon_as_it_passes_the_cap():
    splitter = LineSplitter(max_line_bytes=100)
    assert splitter.feed_bytes(b"ok\n" + b"a" * 60) == [b"ok\n"]
    with pytest.raises(InvalidCorpus, match="line 2 is longer than 100 bytes"):
        splitter.feed_bytes(b"a" * 60)  # no newline yet: refused now, holding no more than cap + chunk


def test_blocks_are_views_of_the_chunk_but_the_held_line_is_joined():
    splitter = LineSplitter()
    assert [bytes(b) for b in splitter.feed_bytes(b"one\ntw")] == [b"one\n"]
    blocks = splitter.feed_bytes(b"o\nthree\nfo")
    assert [bytes(b) for b in blocks] == [b"two\n", b"three\n"] and isinstance(blocks[1], memoryview)
    assert [bytes(b) for b in splitter.feed_bytes(b"ur", final=True)] == [b"four"]
    assert splitter.line_number == 4


def test_a_block_larger_than_the_kept_work_arrays_counts_the_same():
    line = "日本語 and\u00a0words\u2003here \u3000 \n\n \r\n".encode()
    data = line * (SCRATCH_BYTES // len(line) + 100)
    first = data.index(b"\n", 1000) + 1
    assert len(data) - first > SCRATCH_BYTES
    counts = TextCounts()
    counts.add(data[:first])  # work arrays kept first, then a longer block that cannot use them
    counts.add(data[first:])
    assert (counts.lines, counts.words, counts.characters) == per_line([data])


REAL = ["parallel_flores200_dev/eng_Latn.txt", "parallel_flores200_dev/zho_Hans.txt",
        "parallel_flores200_dev/hin_Deva.txt", "debian_reference/jpn_Jpan.txt", "fortunes/rus_Cyrl.txt",
        "manpages/eng_Latn.txt", "code/python.txt", "math_tex/eng_Latn.txt"]


@pytest.fixture(scope="module")
def real_corpora() -> dict[str, bytes]:
    found = {name: (FIXTURES / name).read_bytes()[:3_000_000] for name in REAL if (FIXTURES / name).exists()}
    assert len(found) == len(REAL), sorted(found)
    return {name: data[:data.rfind(b"\n") + 1] for name, data in found.items()}


@pytest.mark.parametrize("size", [1024 * 1024, 65537, 4093])
def test_real_corpora_count_the_same(real_corpora, size):
    for name, data in real_corpora.items():
        pieces = [data[i:i + size] for i in range(0, len(data), size)]
        assert by_chunk(pieces) == per_line(pieces), name


def test_real_corpora_made_awkward_count_the_same(real_corpora):
    # The real text with Unicode spaces for some spaces, CRLF and whitespace-only lines, and no final newline.
    rng = random.Random(1)
    for name, data in real_corpora.items():
        text = data[:400_000].decode()
        text = "".join(rng.choice(SPACES) if c == " " and rng.random() < 0.2 else c for c in text)
        lines = [line + rng.choice(["", "\r", " \r", "\u2028"]) for line in text.split("\n")]
        text = "\n".join(line if rng.random() < 0.9 else rng.choice(SPACES) * 3 + "\n" + line for line in lines)
        data = text.rstrip("\n").encode()
        pieces = cut(data, rng) if len(data) < 50_000 else [data[i:i + 9973] for i in range(0, len(data), 9973)]
        assert by_chunk(pieces) == per_line(pieces), name


def test_jsonl_documents_count_their_words_as_split_does():
    # A chunk's documents at a time, into one running count, as the jsonl upload does.
    rng, counts, expected = random.Random(4), TextCounts(), [0, 0, 0]
    for _ in range(300):
        documents = [random_text(rng, 30) for _ in range(rng.randrange(0, 8))]
        documents = [document for document in documents if document]  # document_of gives no empty one
        counts.add_documents(documents)
        for document in documents:  # the per-document count it replaced
            expected = [expected[0] + 1, expected[1] + len(document.split()), expected[2] + len(document)]
        assert [counts.lines, counts.words, counts.characters] == expected
