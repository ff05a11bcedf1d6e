"""Corpus upload: one streaming pass that stores, hashes, validates and counts.

The uploaded bytes are decompressed (gzip or zstd, recognised by content), checked to be
UTF-8 (and JSON lines, for jsonl) with no line over the cap, hashed and counted while they
stream to the store. A file sent without a format is jsonl when its name says so (.jsonl,
.ndjson, compressed or not), text otherwise; but one whose first non-blank line is a JSON
object is refused, naming `format`, rather than kept as text it is probably not meant to be
(the check reads that line as it streams, and the refusal cleans up as any other does).
No database session is open meanwhile: the row is inserted in a short
transaction of its own once the object is complete. A file that fails any check, or whose
row cannot be inserted, is removed from the store before the error is raised: no row and
no object are left behind (if the store cannot delete it either, the sweeper's
reconciliation pass removes the orphan).

With the team's quotas, an upload is refused (OverQuota, 409) when the team already holds its
`corpora`, and as it streams, as soon as its decompressed bytes pass the `storage_bytes` the
team has left: a zstd bomb stops there, as it stops at TOKENMILL_MAX_UPLOAD_BYTES (TooLarge,
413), whichever is smaller. Both are counted again when the row is inserted, under a lock on
the team's row, so that uploads streaming side by side cannot pass them together.
"""

import contextlib
import hashlib
import logging
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.reading import FORMATS, LineSplitter, decompressed, document_of, json_value
from tokenmill.corpora.text_counts import TextCounts
from tokenmill.db import transaction, unstorable
from tokenmill.errors import InvalidCorpus, InvalidInput, OverQuota, TooLarge
from tokenmill.models import Corpus, Team
from tokenmill.quotas import Quotas, refuse_over, usage_of
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)

NAMED_FIELDS = ("name", "domain", "language")
OPTIONAL_FIELDS = ("text_field", "parallel_group")
MAX_FIELD_LENGTH = 100
JSONL_SUFFIXES = tuple(name + packed for name in (".jsonl", ".ndjson") for packed in ("", ".gz", ".zst", ".zstd"))


def format_by_name(filename: str | None) -> str | None:
    """'jsonl' for a file named as JSON lines (.jsonl, .ndjson, gzipped or zstd'ed); None: the name does not say."""
    return "jsonl" if filename and filename.lower().endswith(JSONL_SUFFIXES) else None


@dataclass
class CorpusFields:
    """What the uploader says about a corpus; `format` None: not said (see `resolved`)."""

    name: str
    domain: str
    language: str
    format: str | None = None
    text_field: str | None = None
    parallel_group: str | None = None
    filename: str | None = None  # the uploaded file's name: a JSON-lines one means jsonl when `format` is not said

    @classmethod
    def from_form(cls, form: Mapping[str, str], filename: str | None) -> "CorpusFields":
        """The fields of an upload form (the API's and the dashboard's), stripped; an empty optional one is not said."""
        def text(name: str) -> str:
            return form.get(name, "").strip()

        return cls(name=text("name"), domain=text("domain"), language=text("language"),
                   format=text("format") or None, text_field=text("text_field") or None,
                   parallel_group=text("parallel_group") or None, filename=filename)

    def resolved(self) -> "CorpusFields":
        """The fields with the format the file's name implies when none was said (None still: text, unless
        its first non-blank line is a JSON object, which `_scanned` refuses)."""
        return replace(self, format=self.format or format_by_name(self.filename))

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
        if self.format is not None and self.format not in FORMATS:
            raise InvalidInput(f"'format' must be one of {', '.join(FORMATS)}", field="format")
        if self.format != "jsonl" and self.text_field:
            hint = "" if self.format else ": send format=jsonl with it"
            raise InvalidInput(f"'text_field' applies to the jsonl format only{hint}", field="text_field")


@dataclass(frozen=True)
class StorageRoom:
    """The team's storage quota as an upload began: what it may store, what it stored."""

    limit: int
    used: int

    @property
    def left(self) -> int:
        return self.limit - self.used

    def check(self, adding: int) -> None:
        """OverQuota when `adding` more bytes would pass the limit."""
        if self.used + adding > self.limit:
            raise OverQuota(f"quota storage_bytes: your team stores {self.used} bytes of corpora of {self.limit}, and "
                            f"this upload passes the {max(self.left, 0)} left (counted decompressed); delete some "
                            "corpora, or ask the operator for a larger quota",
                            quota="storage_bytes", limit=self.limit, used=self.used)


@dataclass
class Tally:
    """Running counts over the decompressed bytes and the documents they hold."""

    max_bytes: int
    max_line_bytes: int
    room: StorageRoom | None = None  # the team's, when quotas apply
    sha256: "hashlib._Hash" = field(default_factory=hashlib.sha256)
    bytes: int = 0
    counts: TextCounts = field(default_factory=TextCounts)  # documents (as lines), words, characters

    def check_size(self) -> None:
        """TooLarge past TOKENMILL_MAX_UPLOAD_BYTES, OverQuota past the team's room: the smaller cap speaks first."""
        if self.room is not None and self.room.left < self.max_bytes:
            self.room.check(self.bytes)
        if self.bytes > self.max_bytes:
            raise TooLarge(f"the corpus exceeds {self.max_bytes} bytes once decompressed")


class Turns:
    """At most `size` uploads of a process decompress, check and count at once; the others wait their turn.

    An upload whose bytes are at hand is all CPU (a zstd bomb is nothing else): forty of them in
    forty threads leave the event loop and the threads that serve reads a fortieth of the GIL
    each, and reads take seconds. A turn is held only while the upload computes: it is given
    back while its next input arrives (a slow client holds none) and while the store takes its
    output (a slow store neither).
    """

    def __init__(self, size: int) -> None:
        self._free = threading.BoundedSemaphore(size)

    def __enter__(self) -> None:
        self._free.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._free.release()

    def waiting_for(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The chunks, read by a holder of a turn that gives it back while each one arrives."""
        iterator = iter(chunks)
        while True:
            self._free.release()
            try:
                chunk = next(iterator, None)
            finally:
                self._free.acquire()
            if chunk is None:
                return
            yield chunk


def _scanned(chunks: Iterable[bytes], fields: CorpusFields, tally: Tally, turns: Turns | None) -> Iterator[bytes]:
    # Passes the decompressed chunks through to the store, checking and counting on the way, in turns.
    splitter = LineSplitter(max_line_bytes=tally.max_line_bytes)
    count = _count_jsonl if fields.format == "jsonl" else _count_text if fields.format else _count_unsaid
    pieces = decompressed(turns.waiting_for(chunks) if turns else chunks)
    turn = turns or contextlib.nullcontext()
    while True:
        with turn:
            chunk = next(pieces, None)
            if chunk is None:
                count(splitter, b"", True, fields, tally)
                return
            tally.bytes += len(chunk)
            tally.check_size()
            tally.sha256.update(chunk)
            count(splitter, chunk, False, fields, tally)
        yield chunk


def _count_text(splitter: LineSplitter, chunk: bytes, final: bool, fields: CorpusFields, tally: Tally) -> None:
    # The chunk's whole lines, validated as UTF-8, counted a block at a time (tokenmill/corpora/text_counts.py).
    for block in splitter.feed_bytes(chunk, final):
        tally.counts.add(block)


def _count_unsaid(splitter: LineSplitter, chunk: bytes, final: bool, fields: CorpusFields, tally: Tally) -> None:
    # No format said, none in the name: text, once the first non-blank line is not a JSON object.
    blocks = splitter.feed_bytes(chunk, final)
    if tally.counts.lines == 0:  # no document yet: the first non-blank line is in these blocks, if anywhere
        _refuse_json_lines(blocks)
    for block in blocks:
        tally.counts.add(block)


def _refuse_json_lines(blocks: Sequence[bytes | memoryview]) -> None:
    # Reads lines (checked UTF-8 already) up to the first non-blank one, then stops: at most a block is copied.
    for block in blocks:
        data, start = bytes(block), 0
        while start < len(data):
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            if line := data[start:end].decode("utf-8").strip():
                if line.startswith("{") and _is_json_object(line):
                    raise InvalidInput(
                        "the file looks like JSON lines (its first line is a JSON object), but no 'format' was "
                        "given: send format=jsonl and text_field=<the key holding the text> (default 'text'), "
                        "or format=text to keep each line as it is", field="format")
                return
            start = end + 1


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json_value(line, 1), dict)
    except InvalidCorpus:  # not JSON, or JSON no reader here takes (too deep, an integer too long)
        return False


def _count_jsonl(splitter: LineSplitter, chunk: bytes, final: bool, fields: CorpusFields, tally: Tally) -> None:
    lines = splitter.feed(chunk, final)
    first = splitter.line_number - len(lines) + 1
    documents = [document for number, line in enumerate(lines, start=first)
                 if (document := document_of(line, number, "jsonl", fields.text_field)) is not None]
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
    quotas: Quotas | None = None,
    turns: Turns | None = None,
) -> Corpus:
    """Stream an uploaded corpus to the store, then register it in a short transaction; nothing is left if it is invalid
    or, with `quotas`, if the team has no room for it. With `turns`, it computes only in its turn."""
    fields = fields.resolved()
    fields.validate()
    room = _room_for_upload(factory, team, quotas) if quotas is not None else None
    corpus_id = uuid.uuid4()
    key = f"corpora/{team.id}/{corpus_id}"
    tally = Tally(max_bytes=max_bytes, max_line_bytes=max_line_bytes, room=room)
    try:
        store.put_stream(key, _scanned(chunks, fields, tally, turns))
        if tally.counts.lines == 0:
            raise InvalidCorpus("the corpus holds no text (empty file or only blank lines)", field="file")
        corpus = _corpus_row(corpus_id, team, fields, key, tally)
        with transaction(factory) as session:
            if quotas is not None:
                _lock_team(session, team)
                _check_quotas(session, team, quotas, tally.bytes)
            session.add(corpus)
    except BaseException:
        _discard(store, key)
        raise
    return corpus


def _room_for_upload(factory: sessionmaker[Session], team: Team, quotas: Quotas) -> StorageRoom:
    # Before a byte is read: refused at once when the team holds its corpora, or has no byte left.
    with factory() as session:
        return _check_quotas(session, team, quotas, 1)


def _check_quotas(session: Session, team: Team, quotas: Quotas, adding_bytes: int) -> StorageRoom:
    usage = usage_of(session, team.id)
    refuse_over("corpora", quotas.corpora, usage.corpora)
    room = StorageRoom(limit=quotas.storage_bytes, used=usage.storage_bytes)
    room.check(adding_bytes)
    return room


def _lock_team(session: Session, team: Team) -> None:
    # Uploads of one team that end side by side count and insert one after the other (PostgreSQL;
    # SQLite, one writer at a time, takes no row lock).
    session.execute(select(Team.id).where(Team.id == team.id).with_for_update())


def _corpus_row(corpus_id: uuid.UUID, team: Team, fields: CorpusFields, key: str, tally: Tally) -> Corpus:
    return Corpus(
        id=corpus_id,
        team_id=team.id,
        name=fields.name.strip(),
        domain=fields.domain.strip(),
        language=fields.language.strip(),
        format=fields.format or "text",
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
