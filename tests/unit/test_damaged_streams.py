"""Compressed uploads cut short or damaged are refused, never read as far as they go.

zstandard's stream reader ends quietly where a truncated frame's input ends, so the frames
are walked alongside it (tokenmill/corpora/reading.py `ZstdFrames`). libzstd itself is the
oracle here: its decompression object says where each frame of a stream ends.
"""

import gzip
import io
import random
from collections.abc import Iterator

import pytest
import zstandard

from tests.unit.test_corpora_limits import Budget, cut
from tokenmill.corpora.reading import ZstdFrames, decompressed
from tokenmill.errors import InvalidCorpus
from tokenmill.store import CHUNK

TEXT = b"".join(b"line %d of a corpus, with words\n" % number for number in range(20_000))
SKIPPABLE = b"\x50\x2a\x4d\x18" + (5).to_bytes(4, "little") + b"skip!"


def flushed(data: bytes, pieces: int) -> bytes:
    """A stream whose writer flushed after every piece: many small blocks, as a streaming compressor makes."""
    out = io.BytesIO()
    with zstandard.ZstdCompressor(write_checksum=True).stream_writer(out, closefd=False) as writer:
        for part in cut(data, [max(1, len(data) // pieces)]):
            writer.write(part)
            writer.flush(zstandard.FLUSH_BLOCK)
    return out.getvalue()


def packed(data: bytes, **options) -> bytes:
    return zstandard.ZstdCompressor(**options).compress(data)


STREAMS = {
    "default": packed(TEXT),
    "checksum, level 19": packed(TEXT, write_checksum=True, level=19),
    "no content size": packed(TEXT, write_content_size=False),
    "random bytes, raw blocks": packed(random.Random(5).randbytes(300_000)),
    "one byte": packed(b"x"),
    "flushed blocks": flushed(TEXT[:50_000], 200),
    "frames and a skippable frame": packed(TEXT[:7000]) + SKIPPABLE + packed(TEXT[7000:9000], write_checksum=True),
}


def frame_ends(stream: bytes) -> set[int]:
    """Where libzstd says each frame (and the skippable one) of a stream ends."""
    ends, at = set(), 0
    while at < len(stream):
        if stream[at:at + 4] == SKIPPABLE[:4]:
            at += len(SKIPPABLE)
        else:
            decoder = zstandard.ZstdDecompressor().decompressobj()
            decoder.decompress(stream[at:])
            assert decoder.eof
            at = len(stream) - len(decoder.unused_data)
        ends.add(at)
    return ends


def unpacked(stream: bytes, sizes: list[int]) -> bytes:
    return b"".join(decompressed(cut(stream, sizes)))


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_stream_cut_anywhere_but_between_frames_is_refused_as_truncated(name):
    stream = STREAMS[name]
    ends = frame_ends(stream)
    cuts = sorted(set(range(5, len(stream), max(1, len(stream) // 300))) | ends | {e - 1 for e in ends})
    for length in cuts:
        prefix = stream[:length]
        if length in ends:  # whole frames: what they hold, nothing more
            assert unpacked(prefix, [4096]) == zstandard.ZstdDecompressor().stream_reader(prefix).read(), length
            continue
        with pytest.raises(InvalidCorpus, match="truncated zstd data") as refused:
            unpacked(prefix, [4096])
        assert refused.value.field == "file"


@pytest.mark.parametrize("name", list(STREAMS))
def test_a_whole_stream_reads_the_same_however_it_is_cut(name):
    stream, expected = STREAMS[name], None
    for sizes in ([97, 5], [4096], [len(STREAMS[name])]):
        out = unpacked(stream, sizes)
        expected = expected if expected is not None else out
        assert out == expected
    assert len(expected) > 0


def test_the_walk_agrees_with_libzstd_at_every_byte_of_a_small_stream():
    stream = packed(b"ab\n" * 50) + SKIPPABLE + packed(b"cd\n" * 70, write_checksum=True, write_content_size=False)
    ends = frame_ends(stream)
    for length in range(1, len(stream) + 1):
        frames = ZstdFrames()
        for piece in cut(stream[:length], [1, 2, 5]):
            frames.feed(piece)
        assert frames.ended == (length in ends), length


@pytest.mark.parametrize("damage", ["flipped", "zeroed"])
def test_a_corrupt_stream_is_refused_naming_the_file(damage):
    stream = bytearray(packed(TEXT, write_checksum=True))
    middle = len(stream) // 2
    stream[middle:middle + 8] = bytes(b ^ 0xA5 for b in stream[middle:middle + 8]) if damage == "flipped" else bytes(8)
    with pytest.raises(InvalidCorpus, match="corrupt zstd data") as refused:
        unpacked(bytes(stream), [CHUNK])
    assert refused.value.field == "file"


@pytest.mark.parametrize("tail", [b"\x00\x00\x00\x00", b"not zstd at all", b"\x28\xb5\x2f\xfd\x00"])
def test_what_follows_the_last_frame_must_be_a_whole_frame(tail):
    with pytest.raises(InvalidCorpus) as refused:
        unpacked(packed(TEXT) + tail, [CHUNK])
    assert refused.value.field == "file" and "zstd data" in refused.value.detail


def test_a_block_of_the_reserved_type_is_corrupt():
    # Magic, a descriptor (single segment, a one-byte content size of 0), a last block of type 3.
    with pytest.raises(InvalidCorpus, match="corrupt zstd data"):
        unpacked(b"\x28\xb5\x2f\xfd\x20\x00" + (0b111).to_bytes(3, "little"), [CHUNK])


@pytest.mark.parametrize("length", [lambda s: len(s) // 2, lambda s: len(s) - 1, lambda s: 10])
def test_gzip_cut_short_is_refused_as_before(length):
    stream = gzip.compress(TEXT)
    with pytest.raises(InvalidCorpus, match="truncated gzip data") as refused:
        unpacked(stream[:length(stream)], [4096])
    assert refused.value.field == "file"


def test_a_zstd_bomb_comes_out_a_chunk_at_a_time():
    bomb = packed(b"the same line\n" * (64 * CHUNK // 14))  # 64 MiB in a few kilobytes
    assert len(bomb) < 64 * 1024
    largest, total = 0, 0
    for piece in decompressed([bomb]):
        largest, total = max(largest, len(piece)), total + len(piece)
    assert largest <= CHUNK and total == 64 * CHUNK // 14 * 14


def test_the_walk_costs_linear_time_on_the_smallest_blocks():
    # 4 MiB of four-byte blocks, each one byte of output: a few steps per block (under a second
    # of CPU), not per byte or per block squared.
    block = (0b1010).to_bytes(3, "little") + b"a"  # size 1 (bits 3 on), run-length (bits 1-2: 1), not last (bit 0)
    budget, frames = Budget(20.0), ZstdFrames()

    def pieces() -> Iterator[bytes]:
        yield b"\x28\xb5\x2f\xfd\x00\x00"
        for _ in range(4 * 4):
            budget.spend()
            yield block * (CHUNK // 16)
        yield (0b1011).to_bytes(3, "little") + b"\n"  # the last

    for piece in pieces():
        frames.feed(piece)
    assert frames.ended
