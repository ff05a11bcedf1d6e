"""Byte ranges of a stored corpus (stored decompressed, so a ranged read lands anywhere), for work
spread over workers: a training job's counting (tokenmill.training.counting) and an evaluation's
measuring (tokenmill.evaluation.parts).

A range [start, end) owns the lines that start inside it: a reader starting mid-line skips to the
next line, and the last line is read to its end past `end`. Every line of a corpus is in exactly
one range, whatever the range size.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tokenmill.corpora.reading import documents_of
from tokenmill.models import Corpus
from tokenmill.store import ObjectStore


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


class Numbered:
    """Documents, counted as they are read (across passes, when `documents` is replaced), for a
    part's heartbeat; `alive` (a coordinator's progress report, which notices a cancel) is called
    every thousand."""

    def __init__(self, documents: Iterator[str], alive: Callable[[], None] | None = None) -> None:
        self.documents, self.alive, self.count = documents, alive, 0

    def __iter__(self) -> Iterator[str]:
        for document in self.documents:
            if self.alive is not None and self.count % 1000 == 0:
                self.alive()
            self.count += 1
            yield document

    def read(self) -> int:
        return self.count
