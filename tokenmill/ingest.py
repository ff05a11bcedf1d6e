"""Corpus upload: one streaming pass that stores, hashes, validates and counts.

The uploaded bytes are decompressed (gzip or zstd, recognised by content), checked to be
UTF-8 (and JSON lines, for jsonl) with no line over the cap, hashed and counted while they
stream to the store. No database session is open meanwhile: the row is inserted in a short
transaction of its own once the object is complete. A file that fails any check, or whose
row cannot be inserted, is removed from the store before the error is raised: no row and
no object are left behind (if the store cannot delete it either, the sweeper's
reconciliation pass removes the orphan).
"""

import hashlib
import logging
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora import FORMATS, LineSplitter, decompressed, document_of
from tokenmill.db import transaction
from tokenmill.errors import InvalidCorpus, InvalidInput, TooLarge
from tokenmill.models import Corpus, Team
from tokenmill.store import ObjectStore
from tokenmill.text_counts import TextCounts

log = logging.getLogger(__name__)

NAMED_FIELDS = ("name", "domain", "language")
OPTIONAL_FIELDS = ("text_field", "parallel_group")
MAX_FIELD_LENGTH = 100


def unstorable(value: str) -> str | None:
    """Why a string cannot be stored in a row, or None: PostgreSQL text holds no NUL, and a lone surrogate is not text."""
    if "\x00" in value:
        return "holds a NUL character (U+0000)"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "holds a lone surrogate (U+D800 to U+DFFF), which is not text"
    return None


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
        for name in NAMED_FIELDS:
            value = getattr(self, name)
            if not value or not value.strip() or len(value) > MAX_FIELD_LENGTH:
                raise InvalidInput(f"'{name}' is required (1 to {MAX_FIELD_LENGTH} characters)", field=name)
        for name in OPTIONAL_FIELDS:
            if len(getattr(self, name) or "") > MAX_FIELD_LENGTH:
                raise InvalidInput(f"'{name}' is at most {MAX_FIELD_LENGTH} characters", field=name)
        for name in NAMED_FIELDS + OPTIONAL_FIELDS:
            if reason := unstorable(getattr(self, name) or ""):
                raise InvalidInput(f"'{name}' {reason}", field=name)
        if self.format not in FORMATS:
            raise InvalidInput(f"'format' must be one of {', '.join(FORMATS)}", field="format")
        if self.format == "text" and self.text_field:
            raise InvalidInput("'text_field' applies to the jsonl format only", field="text_field")


@dataclass
class Tally:
    """Running counts over the decompressed bytes and the documents they hold."""

    max_bytes: int
    max_line_bytes: int
    sha256: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    bytes: int = 0
    counts: TextCounts = field(default_factory=TextCounts)  # documents (as lines), words, characters


def _scanned(chunks: Iterable[bytes], fields: CorpusFields, tally: Tally) -> Iterator[bytes]:
    # Passes the decompressed chunks through to the store, checking and counting on the way.
    splitter = LineSplitter(max_line_bytes=tally.max_line_bytes)
    count = _count_text if fields.format == "text" else _count_jsonl
    for chunk in decompressed(chunks):
        tally.bytes += len(chunk)
        if tally.bytes > tally.max_bytes:
            raise TooLarge(f"the corpus exceeds {tally.max_bytes} bytes once decompressed")
        tally.sha256.update(chunk)
        count(splitter, chunk, False, fields, tally)
        yield chunk
    count(splitter, b"", True, fields, tally)


def _count_text(splitter: LineSplitter, chunk: bytes, final: bool, fields: CorpusFields, tally: Tally) -> None:
    # The chunk's whole lines, validated as UTF-8, counted a block at a time (tokenmill/text_counts.py).
    for block in splitter.feed_bytes(chunk, final):
        tally.counts.add(block)


def _count_jsonl(splitter: LineSplitter, chunk: bytes, final: bool, fields: CorpusFields, tally: Tally) -> None:
    lines = splitter.feed(chunk, final)
    first = splitter.line_number - len(lines) + 1
    documents = [document for number, line in enumerate(lines, start=first)
                 if (document := document_of(line, number, fields.format, fields.text_field)) is not None]
    tally.counts.add_documents(documents)


def ingest_corpus(
    factory: sessionmaker[Session],
    store: ObjectStore,
    team: Team,
    fields: CorpusFields,
    chunks: Iterable[bytes],
    *,
    max_bytes: int,
    max_line_bytes: int,
) -> Corpus:
    """Stream an uploaded corpus to the store, then register it in a short transaction; nothing is left if it is invalid."""
    fields.validate()
    corpus_id = uuid.uuid4()
    key = f"corpora/{team.id}/{corpus_id}"
    tally = Tally(max_bytes=max_bytes, max_line_bytes=max_line_bytes)
    try:
        store.put_stream(key, _scanned(chunks, fields, tally))
        if tally.counts.lines == 0:
            raise InvalidCorpus("the corpus holds no text (empty file or only blank lines)", field="file")
        corpus = _corpus_row(corpus_id, team, fields, key, tally)
        with transaction(factory) as session:
            session.add(corpus)
    except BaseException:
        _discard(store, key)
        raise
    return corpus


def _corpus_row(corpus_id: uuid.UUID, team: Team, fields: CorpusFields, key: str, tally: Tally) -> Corpus:
    return Corpus(
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
        lines=tally.counts.lines,
        words=tally.counts.words,
        characters=tally.counts.characters,
    )


def _discard(store: ObjectStore, key: str) -> None:
    # Called while another error propagates: a store that fails here too must not hide it.
    try:
        store.delete_prefix(key)
    except Exception as exc:  # whatever the store says, the original error is the answer
        log.warning("could not remove %s after a failed upload (reconciliation removes it): %s: %s",
                    key, type(exc).__name__, exc)
