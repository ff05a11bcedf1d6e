"""Counting a corpus in parts: byte ranges of its stored object, the pieces each holds, counts
spilled to the store, and the streamed merge of the spills.

- A part is a byte range [start, end) of a stored corpus (stored decompressed, so a ranged read
  lands anywhere). It owns the lines that start inside it: a reader starting mid-line skips to
  the next line, and the last line is read to its end past `end`. Every line of a corpus is in
  exactly one part, whatever the part size.
- Pieces are what a tokenizer learns from: for byte-level BPE, the spec's normalizer then its
  pre-tokenization regex (Python's `regex`, which matches as tiktoken's and rustbpe's engines
  do on these patterns); for sentencepiece, the words between whitespace.
- Spilled counts are (piece, count) records sorted by the piece's UTF-8 bytes, zlib-compressed:
  any number of them merge in one streaming pass (`merged`), holding one record of each.
"""

import heapq
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import regex

from tokenmill.corpora.reading import documents_of
from tokenmill.models import Corpus
from tokenmill.store import ObjectStore
from tokenmill.training.spec import TrainingSpec

RECORD = struct.Struct("<IQ")  # piece length in bytes, count
Split = Callable[[str], list[str]]


@dataclass(frozen=True)
class Part:
    corpus: Corpus
    start: int
    end: int


def plan(corpora: list[Corpus], part_bytes: int) -> list[Part]:
    """Every corpus cut into byte ranges of at most `part_bytes`, in order."""
    return [Part(corpus, start, min(start + part_bytes, corpus.bytes))
            for corpus in corpora for start in range(0, corpus.bytes, part_bytes)]


def part_bytes(store: ObjectStore, key: str, start: int, end: int) -> Iterator[bytes]:
    """The bytes of the lines that start in [start, end) of a stored object."""
    chunks = store.iter_chunks(key, start=max(start - 1, 0))
    position = max(start - 1, 0)
    if start > 0:
        # Skip the line in progress at `start`: up to and with the first newline from start - 1.
        for chunk in chunks:
            newline = chunk.find(b"\n")
            if newline >= 0:
                chunk, position = chunk[newline + 1:], position + newline + 1
                break
            position += len(chunk)
        else:
            return
        if position >= end:
            return  # a line longer than the part started before it: the previous part has it
        chunks = _chained(chunk, chunks)
    for chunk in chunks:
        if position + len(chunk) < end:
            yield chunk
            position += len(chunk)
            continue
        # The part ends in this chunk: to `end`, then on to the end of the line that crosses it.
        newline = chunk.find(b"\n", end - position - 1)  # the byte before `end` on (it is in this chunk)
        if newline >= 0:
            yield chunk[:newline + 1]
            return
        yield chunk
        for rest in chunks:
            newline = rest.find(b"\n")
            if newline >= 0:
                yield rest[:newline + 1]
                return
            yield rest
        return


def _chained(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def part_documents(store: ObjectStore, part: Part, max_line_bytes: int | None = None) -> Iterator[str]:
    """The documents of the lines a part owns."""
    return documents_of(part_bytes(store, part.corpus.storage_key, part.start, part.end), part.corpus, max_line_bytes)


def splitter(spec: TrainingSpec) -> Split:
    """How a document becomes the pieces the spec's library learns from."""
    if spec.library == "sentencepiece":
        return str.split
    from tokenmill.training import with_tokenizers

    normalizer = with_tokenizers.normalizer_of(spec)
    assert spec.regex_pattern is not None  # the other library, rustbpe, refuses a spec without one
    pattern = regex.compile(spec.regex_pattern)
    if normalizer is None:
        return pattern.findall
    return lambda text: pattern.findall(normalizer.normalize_str(text))


def count(documents: Iterable[str], split: Split) -> Counter[str]:
    """How often each piece occurs in the documents."""
    counts: Counter[str] = Counter()
    for document in documents:
        counts.update(split(document))
    return counts


def spilled(counts: Counter[str]) -> bytes:
    """The counts as a spill: records sorted by piece bytes, compressed."""
    # UTF-8 keeps code point order, so sorting the strings sorts their bytes.
    packer = zlib.compressobj(1)
    out = []
    for piece in sorted(counts):
        data = piece.encode("utf-8")
        out.append(packer.compress(RECORD.pack(len(data), counts[piece]) + data))
    out.append(packer.flush())
    return b"".join(out)


SPILL_READ = 64 * 1024  # a spill is read and decompressed this much at a time: many are merged at once


def records(chunks: Iterable[bytes]) -> Iterator[tuple[bytes, int]]:
    """The (piece bytes, count) records of a spill, streamed (at most about SPILL_READ of it
    decompressed at a time)."""
    unpacker = zlib.decompressobj()
    buffer = b""
    for chunk in chunks:
        while chunk:
            buffer += unpacker.decompress(chunk, SPILL_READ)
            chunk = unpacker.unconsumed_tail
            at = 0
            while len(buffer) - at >= RECORD.size:
                length, seen = RECORD.unpack_from(buffer, at)
                if len(buffer) - at - RECORD.size < length:
                    break
                yield buffer[at + RECORD.size:at + RECORD.size + length], seen
                at += RECORD.size + length
            buffer = buffer[at:]
    buffer += unpacker.flush()
    if buffer:
        raise ValueError("a spill of counts ends inside a record")


def merged(spills: Iterable[Iterable[tuple[bytes, int]]], min_count: int = 1) -> Iterator[tuple[bytes, int]]:
    """The spills' counts added up, in piece order, leaving out pieces seen fewer than
    `min_count` times in all."""
    piece, total = None, 0
    for key, seen in heapq.merge(*spills, key=lambda record: record[0]):
        if key != piece:
            if piece is not None and total >= min_count:
                yield piece, total
            piece, total = key, 0
        total += seen
    if piece is not None and total >= min_count:
        yield piece, total
