"""Pieces counted, and counts spilled: what any counting of texts (in parts on many workers, or
on every core of one) makes and merges.

- Pieces are what byte-level BPE learns from: the spec's normalizer, then its pre-tokenization
  regex (Python's `regex`, which matches as tiktoken's and rustbpe's engines do on these
  patterns), document by document (`split_by`), each within a time limit if one is given
  (a custom regex's: tokenmill.training.regex_limit); for sentencepiece, the words between
  whitespace (`splitter` says which for a spec).
- A spill is (piece, count) records sorted by the piece's UTF-8 bytes, zlib-compressed: any
  number of them merge in one streaming pass (`merged`), holding one record of each.

This module imports only the standard library, `regex` and tokenmill.errors: counting processes import it and
little else.
"""

import heapq
import struct
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

import regex

from tokenmill.errors import SlowDocument

if TYPE_CHECKING:
    from tokenmill.training.spec import TrainingSpec

RECORD = struct.Struct("<IQ")  # piece length in bytes, count
# A limited split's allowance beyond its limit, for a long document's length: about a tenth of the
# pace of Python's regex (with its timeout) on one core, so a busy machine does not fail an 8 MiB line.
CHARACTERS_PER_SECOND = 1_000_000
Split = Callable[[str], list[str]]


class Normalizer(Protocol):
    def normalize_str(self, text: str) -> str: ...


def split_by(pattern: str, normalizer: Normalizer | None, seconds: float | None = None) -> Split:
    """Split a document as byte-level BPE learns it: normalized, then cut by the regex, which
    raises TimeoutError past `seconds` plus a second per CHARACTERS_PER_SECOND of the document
    (None: no limit, and no cost: regex's timeout doubles its time per match)."""
    compiled = regex.compile(pattern)
    if seconds is not None:
        limit = seconds

        def limited(text: str) -> list[str]:
            if normalizer is not None:
                text = normalizer.normalize_str(text)
            return compiled.findall(text, timeout=limit + len(text) / CHARACTERS_PER_SECOND)

        return limited
    if normalizer is None:
        return compiled.findall
    return lambda text: compiled.findall(normalizer.normalize_str(text))


def count(documents: Iterable[str], split: Split) -> Counter[str]:
    """How often each piece occurs in the documents; SlowDocument if a split runs past its limit."""
    counts: Counter[str] = Counter()
    for number, document in enumerate(documents):
        try:
            pieces = split(document)
        except TimeoutError:  # only a limited split raises it (a store's timeouts come from reading the documents)
            raise SlowDocument(number) from None
        counts.update(pieces)
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


def merged(spills: Iterable[Iterable[tuple[bytes, float]]], min_count: int = 1) -> Iterator[tuple[bytes, int]]:
    """The spills' counts added up (and rounded, for weighted ones), in piece order, leaving out
    pieces seen fewer than `min_count` times in all."""
    piece, total = None, 0.0
    for key, seen in heapq.merge(*spills, key=lambda record: record[0]):
        if key != piece:
            if piece is not None and (count := round(total)) >= min_count:
                yield piece, count
            piece, total = key, 0
        total += seen
    if piece is not None and (count := round(total)) >= min_count:
        yield piece, count


def weighted(records: Iterable[tuple[bytes, int]], weight: float) -> Iterator[tuple[bytes, float]]:
    """A spill's counts times `weight` (a mixture's rate for the spill's corpus)."""
    if weight == 1.0:
        yield from records
        return
    for piece, seen in records:
        yield piece, seen * weight


def splitter(spec: "TrainingSpec", regex_seconds: float | None = None) -> Split:
    """How a document becomes the pieces the spec's library learns from; a custom regex's
    split raises TimeoutError past `regex_seconds` on one document."""
    if spec.library == "sentencepiece":
        return str.split
    from tokenmill.training import with_tokenizers
    from tokenmill.training.regex_limit import limit_of

    assert spec.regex_pattern is not None  # the byte-level libraries refuse a spec without one
    return split_by(spec.regex_pattern, with_tokenizers.normalizer_of(spec),
                    limit_of(spec.pre_tokenizer_regex, regex_seconds))
