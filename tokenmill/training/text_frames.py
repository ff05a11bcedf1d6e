"""Texts down a pipe to a training child process, and anything else back, as length-prefixed frames.

A frame is its length (8 bytes, little-endian) then its bytes. Texts go a batch at a time
(`batches`: about a million characters), each batch as two frames: the texts' lengths in
characters, then all of them as one UTF-8 string (one join and one encode per batch, not per
text). Lone surrogates cross as they are ("surrogatepass"), as a Python string holds them.
"""

import struct
from array import array
from collections.abc import Iterable, Iterator
from itertools import accumulate
from typing import IO

LENGTH = struct.Struct("<Q")
BATCH_CHARS = 1 << 20  # texts go down a pipe about a million characters at a time


def batches(texts: Iterable[str]) -> Iterator[list[str]]:
    """The texts in order, in lists of about BATCH_CHARS characters."""
    batch: list[str] = []
    size = 0
    for text in texts:
        batch.append(text)
        size += len(text)
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def write_texts(stream: IO[bytes], texts: list[str]) -> None:
    """One batch of texts, as two frames."""
    write_frame(stream, array("I", map(len, texts)).tobytes())
    write_frame(stream, "".join(texts).encode("utf-8", "surrogatepass"))


def read_texts(stream: IO[bytes]) -> Iterator[str]:
    """The texts `write_texts` wrote, in order, until the stream ends."""
    found = frames(stream)
    for lengths in found:
        joined = next(found).decode("utf-8", "surrogatepass")
        ends = list(accumulate(array("I", lengths)))
        yield from map(joined.__getitem__, map(slice, [0, *ends[:-1]], ends))


def write_frame(stream: IO[bytes], data: bytes) -> None:
    stream.write(LENGTH.pack(len(data)))
    stream.write(data)


def frames(stream: IO[bytes]) -> Iterator[bytes]:
    """The frames of a stream, until it ends."""
    while header := stream.read(LENGTH.size):
        yield stream.read(LENGTH.unpack(header)[0])
