"""Corpus line splitting: linear on long lines, the same lines however the bytes are cut, and a cap on line length.

The cost tests give a CPU-time budget about a hundred times what the linear code needs, and
stop as soon as it is spent (the quadratic code would run for minutes): they measure an
order of growth, not a speed.
"""

import random
import re
import time
import tracemalloc
import zlib
from collections.abc import Iterator

import psutil
import pytest

from tokenmill.corpora.reading import LineSplitter, decompressed, iter_lines
from tokenmill.errors import InvalidCorpus
from tokenmill.store import CHUNK, ChunkReader

SAMPLE = "plain line\r\nwith é and 日本語\n\nU+2028 \u2028 stays inside\r\n\r\n\rlast, no newline\r".encode()


def reference_lines(data: bytes) -> list[str]:
    """What the splitter must return: lines end at "\\n", a trailing "\\r" is dropped, no empty tail."""
    lines = data.decode("utf-8").split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    """The data in pieces of the given sizes, cycling through them."""
    pieces, start = [], 0
    while start < len(data):
        size = sizes[len(pieces) % len(sizes)]
        pieces.append(data[start:start + size])
        start += size
    return pieces


def split_all(pieces: list[bytes], **options) -> tuple[list[str], int]:
    splitter = LineSplitter(**options)
    lines = [line for piece in pieces for line in splitter.feed(piece)]
    lines += splitter.feed(b"", final=True)
    return lines, splitter.line_number


@pytest.mark.parametrize("sizes", [[1], [2], [3], [5, 1, 7], [len(SAMPLE)], [4096]])
def test_lines_are_the_same_however_the_bytes_are_cut(sizes):
    lines, counted = split_all(cut(SAMPLE, sizes))
    assert lines == reference_lines(SAMPLE)
    assert counted == len(lines) == 6


def test_random_cuts_of_random_text_give_the_reference_lines():
    rng = random.Random(7)
    alphabet = ["a", "é", "日", "😀", "\n", "\r", "\r\n", " ", "\u2028"]
    for _ in range(200):
        data = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))).encode()
        sizes = [rng.randrange(1, 9) for _ in range(3)]
        assert split_all(cut(data, sizes))[0] == reference_lines(data), data


def test_final_chunk_may_carry_data_and_an_empty_stream_has_no_lines():
    splitter = LineSplitter()
    assert splitter.feed(b"one\ntw") == ["one"]
    assert splitter.feed(b"o\nthree", final=True) == ["two", "three"]
    assert splitter.line_number == 3
    assert split_all([]) == ([], 0)
    assert list(iter_lines([b"a\r\n", b"\n", b"b"])) == ["a", "", "b"]


@pytest.mark.parametrize(("pieces", "line"), [
    ([b"ok\nok\nbad \xff here\n"], 3),
    ([b"ok\nbad \xc3", b"\nok\n"], 2),  # a character cut short by the newline
    ([b"ok\n", b"a" * 100, b"\xe6\x97", b"\n"], 2),  # cut short by a chunk boundary, then the newline
    ([b"ok\nok\nok\n", b"\xed\xa0\x80\n"], 4),  # an encoded surrogate is not UTF-8
    ([b"ok\nlast \xe6\x97"], 2),  # cut short by the end of the file
])
def test_invalid_utf8_names_its_line(pieces, line):
    with pytest.raises(InvalidCorpus, match=f"invalid UTF-8 in line {line}:") as refused:
        split_all(pieces)
    assert refused.value.field == "file"


class Budget:
    """CPU seconds a test may spend; `spend()` fails it as soon as they are gone."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.process_time()

    def spend(self) -> None:
        used = time.process_time() - self.start
        assert used < self.seconds, f"{used:.1f} CPU s spent: the cost grows faster than the input"


def test_a_long_line_in_small_chunks_costs_linear_time():
    # 32 MiB in 4 KiB chunks: ~0.1 s when each byte is copied a few times; re-copying the
    # unfinished line per chunk would copy 128 GiB.
    budget, splitter = Budget(10.0), LineSplitter()
    piece = b"a" * 4096
    for _ in range(8192):
        assert splitter.feed(piece) == []
        budget.spend()
    lines = splitter.feed(b"\nnext\n")
    assert [len(line) for line in lines] == [8192 * 4096, 4]
    assert splitter.line_number == 2


def test_a_long_line_costs_at_most_twice_its_size_in_memory():
    # The line's pieces and their one join, then its bytes and its text: never a third copy
    # (re-joining per chunk peaks at three). tracemalloc counts exactly, unlike RSS.
    size, piece = 32 * CHUNK, b"a" * CHUNK
    splitter = LineSplitter()
    tracemalloc.start()
    try:
        for _ in range(size // CHUNK):
            splitter.feed(piece)
        lines = splitter.feed(b"\n")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(lines[0]) == size
    assert peak < 2.5 * size, f"peak {peak / size:.1f}x the line"


def test_chunk_reader_costs_linear_time_and_keeps_the_bytes():
    budget = Budget(10.0)

    def chunks() -> Iterator[bytes]:
        for number in range(64 * 1024):  # 64 MiB in 1 KiB chunks, read in 8 MiB parts and at once
            budget.spend()
            yield bytes([number % 251]) * 1024

    reader = ChunkReader(chunks())
    parts = [reader.read(8 * CHUNK) for _ in range(4)]
    rest = reader.read()
    assert [len(part) for part in parts] == [8 * CHUNK] * 4 and len(rest) == 32 * CHUNK
    assert reader.read() == b"" and reader.read(10) == b""
    assert parts[1][:1024] == bytes([(8 * 1024) % 251]) * 1024


def test_chunk_reader_gives_the_same_bytes_for_any_read_sizes():
    rng = random.Random(3)
    data = bytes(rng.randrange(256) for _ in range(5000))
    for _ in range(50):
        reader = ChunkReader(cut(data, [rng.randrange(1, 300) for _ in range(4)]))
        out = []
        while piece := reader.read(rng.choice([0, 1, 7, 64, 999, -1])) or reader.read(1):
            out.append(piece)
        assert b"".join(out) == data


# --- the cap on line length ---------------------------------------------------------------



def too_long(line: int, cap: int) -> str:
    """The refusal's message, as a pattern for pytest.raises."""
    return re.escape(f"line {line} is longer than {cap} bytes (the limit, TOKENMILL_MAX_LINE_BYTES)")


@pytest.mark.parametrize("sizes", [[1], [3], [10], [1000]])
def test_a_line_over_the_cap_is_refused_with_its_number_however_it_is_cut(sizes):
    data = b"short\n" + b"x" * 10 + b"\n" + b"y" * 11 + b"\nnever reached\n"
    with pytest.raises(InvalidCorpus, match=too_long(3, 10)) as refused:
        split_all(cut(data, sizes), max_line_bytes=10)
    assert refused.value.field == "file"


def test_lines_at_the_cap_pass_and_no_cap_means_none():
    data = b"x" * 10 + b"\n" + "é".encode() * 5 + b"\n" + b"z" * 10
    assert split_all(cut(data, [4]), max_line_bytes=10)[0] == ["x" * 10, "é" * 5, "z" * 10]
    assert split_all([b"y" * 10_000], max_line_bytes=None)[0] == ["y" * 10_000]
    with pytest.raises(InvalidCorpus, match=too_long(2, 9)):
        split_all([b"abc\n" + "é".encode() * 5], max_line_bytes=9)  # five characters, ten bytes
    with pytest.raises(InvalidCorpus, match=too_long(1, 5)):
        list(iter_lines([b"abc", b"def"], max_line_bytes=5))


def test_the_unfinished_line_is_refused_as_soon_as_it_passes_the_cap():
    splitter = LineSplitter(max_line_bytes=100)
    splitter.feed(b"a" * 60)
    with pytest.raises(InvalidCorpus, match=too_long(1, 100)):
        splitter.feed(b"a" * 60)  # no newline yet: refused now, not when the line ends


@pytest.fixture(scope="module")
def gzip_bomb() -> bytes:
    """About 0.5 MB of gzip that holds one 512 MiB line of "a" (no newline)."""
    packer, block = zlib.compressobj(9, wbits=31), b"a" * CHUNK
    packed = b"".join(packer.compress(block) for _ in range(512)) + packer.flush()
    assert len(packed) < 600_000
    return packed


def test_a_gzip_bomb_of_one_long_line_is_refused_holding_about_the_cap(gzip_bomb):
    cap, decompressed_bytes = 8 * CHUNK, 0
    process = psutil.Process()
    before = process.memory_info().rss

    def counted() -> Iterator[bytes]:
        nonlocal decompressed_bytes
        for chunk in decompressed([gzip_bomb]):
            decompressed_bytes += len(chunk)
            yield chunk

    with pytest.raises(InvalidCorpus, match=too_long(1, cap)):
        list(iter_lines(counted(), max_line_bytes=cap))
    # Refused within a chunk of the cap, long before the 512 MiB are out; memory grew by
    # about the cap, not the line (loosely: RSS is noisy).
    assert decompressed_bytes <= cap + CHUNK
    assert process.memory_info().rss - before < 100 * 1024**2
