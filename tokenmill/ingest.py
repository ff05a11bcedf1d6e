"""Corpus upload: one streaming pass that stores, hashes, validates and counts.

The uploaded bytes are decompressed (gzip or zstd, recognised by content), checked to be
UTF-8 (and JSON lines, for jsonl), hashed and counted while they stream to the store. A
file that fails any check is removed from the store before the error is raised: no row
and no object are left behind.
"""

import hashlib
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from tokenmill.corpora import FORMATS, LineSplitter, decompressed, document_of
from tokenmill.errors import InvalidCorpus, InvalidInput, TooLarge
from tokenmill.models import Corpus, Team
from tokenmill.store import ObjectStore


@dataclass
class CorpusFields:
    """What the uploader says about a corpus."""

    name: str
    domain: str
    language: str
    format: str = "text"
    text_field: str | None = None
    parallel_group: str | None = None

    def validate(self) -> None:
        for name in ("name", "domain", "language"):
            value = getattr(self, name)
            if not value or not value.strip() or len(value) > 100:
                raise InvalidInput(f"'{name}' is required (1 to 100 characters)", field=name)
        if self.format not in FORMATS:
            raise InvalidInput(f"'format' must be one of {', '.join(FORMATS)}", field="format")
        if self.format == "text" and self.text_field:
            raise InvalidInput("'text_field' applies to the jsonl format only", field="text_field")


@dataclass
class Tally:
    """Running counts over the decompressed bytes and the documents they hold."""

    max_bytes: int
    sha256: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    bytes: int = 0
    lines: int = 0
    words: int = 0
    characters: int = 0

    def count(self, document: str) -> None:
        self.lines += 1
        self.words += len(document.split())
        self.characters += len(document)


def _scanned(chunks: Iterable[bytes], fields: CorpusFields, tally: Tally) -> Iterator[bytes]:
    # Passes the decompressed chunks through to the store, checking and counting on the way.
    splitter = LineSplitter()
    for chunk in decompressed(chunks):
        tally.bytes += len(chunk)
        if tally.bytes > tally.max_bytes:
            raise TooLarge(f"the corpus exceeds {tally.max_bytes} bytes once decompressed")
        tally.sha256.update(chunk)
        _count_lines(splitter, splitter.feed(chunk), fields, tally)
        yield chunk
    _count_lines(splitter, splitter.feed(b"", final=True), fields, tally)


def _count_lines(splitter: LineSplitter, lines: list[str], fields: CorpusFields, tally: Tally) -> None:
    first = splitter.line_number - len(lines) + 1
    for number, line in enumerate(lines, start=first):
        document = document_of(line, number, fields.format, fields.text_field)
        if document is not None:
            tally.count(document)


def ingest_corpus(
    session: Session,
    store: ObjectStore,
    team: Team,
    fields: CorpusFields,
    chunks: Iterable[bytes],
    max_bytes: int,
) -> Corpus:
    """Store an uploaded corpus and register it; nothing is left behind if it is invalid."""
    fields.validate()
    corpus_id = uuid.uuid4()
    key = f"corpora/{team.id}/{corpus_id}"
    tally = Tally(max_bytes=max_bytes)
    try:
        store.put_stream(key, _scanned(chunks, fields, tally))
        if tally.lines == 0:
            raise InvalidCorpus("the corpus holds no text (empty file or only blank lines)", field="file")
        corpus = Corpus(
            id=corpus_id,
            team_id=team.id,
            name=fields.name.strip(),
            domain=fields.domain.strip(),
            language=fields.language.strip(),
            format=fields.format,
            text_field=fields.text_field if fields.format == "jsonl" else None,
            parallel_group=fields.parallel_group or None,
            storage_key=key,
            sha256=tally.sha256.hexdigest(),
            bytes=tally.bytes,
            lines=tally.lines,
            words=tally.words,
            characters=tally.characters,
        )
        session.add(corpus)
        session.flush()
    except BaseException:
        store.delete_prefix(key)
        raise
    return corpus
