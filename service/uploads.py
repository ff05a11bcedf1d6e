"""A multipart upload read as it arrives: the form's fields first, then its file, streamed in pieces.

Starlette's form parser writes a file part to a temporary file (on disk past 1 MiB) that the
route then reads back. Here python-multipart's push parser is fed the request body as it
comes, and the file part's bytes go on in pieces of about a megabyte to the synchronous core,
which runs in a worker thread and pulls each piece from the event loop: the socket is read
only as fast as the core consumes, and no more than a piece and a message are held.

The core runs in threads of its own (UPLOAD_THREADS), not in the pool that serves the
synchronous routes: a slow client holds its upload's thread for as long as it sends, and
forty of them must not leave the rest of the API waiting for a thread.

Fields after the file: the core must know them (the format, say) before the file's first
byte. When the file starts after the fields a route names as `before_file`, `streams` is
true: the file streams (`file_chunks`), and a field that comes after it is refused with a
422 that names it. Otherwise the route asks for `spooled_file`, which writes the file to a
temporary file (on disk past a megabyte, as Starlette does), reads the fields after it and
hands the file back to be read from the start. Every order works; the fields-first one
(httpx's data before its files, browsers' document order, curl's -F options as given) does
without writing and reading the file once more.
Each field holds at most MAX_FIELD_BYTES, a form at most MAX_PARTS parts.

`ingest_upload` is the one path of a corpus upload, for POST /v1/corpora and the dashboard's
form alike: the team's quotas (concurrent uploads held for the whole upload; corpora and
storage counted by the core as the file streams), the fields, the caller's own check of them
(the dashboard's CSRF token) before the file's first byte is read, the file through
`ingest_corpus` in an upload thread, then the statistics task.
"""

import asyncio
import contextvars
import functools
import os
import tempfile
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import BinaryIO, ParamSpec, TypeVar, cast

import anyio.from_thread
import anyio.lowlevel
from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header
from starlette.requests import ClientDisconnect, Request

from service.deps import team_quotas
from tokenmill.corpora.ingest import CorpusFields, Turns, ingest_corpus
from tokenmill.errors import InvalidInput
from tokenmill.models import Corpus, Team
from tokenmill.quotas import Quotas, refuse_over
from tokenmill.store import CHUNK, read_into

MAX_FIELD_BYTES = 16 * 1024
MAX_PARTS = 32
# A form's file part as the OpenAPI document describes it (OpenAPI 3.1; FastAPI writes an UploadFile so).
FILE_PART = {"type": "string", "contentMediaType": "application/octet-stream"}
MAX_STREAMING_UPLOADS = 64  # at once; more wait for a thread, their bodies unread
UPLOAD_THREADS = ThreadPoolExecutor(MAX_STREAMING_UPLOADS, thread_name_prefix="tokenmill-upload")
# Of those, how many decompress, check and count at once (tokenmill/corpora/ingest.py Turns): about
# one per core, so that the event loop and the threads serving reads still get the GIL.
COMPUTING = Turns(max(1, (os.cpu_count() or 1) - 1))

T = TypeVar("T")
P = ParamSpec("P")


class UploadsInFlight:
    """How many uploads each team streams through this API process now, under its concurrent_uploads quota."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._teams: Counter[uuid.UUID] = Counter()

    @contextmanager
    def held(self, team_id: uuid.UUID, limit: int) -> Iterator[None]:
        """One upload of the team, for as long as the block runs; OverQuota (409, Retry-After) past `limit`."""
        with self._lock:
            refuse_over("concurrent_uploads", limit, self._teams[team_id], what="uploads in flight", retry_after=5)
            self._teams[team_id] += 1
        try:
            yield
        finally:
            with self._lock:
                self._teams[team_id] -= 1
                if self._teams[team_id] <= 0:
                    del self._teams[team_id]

    def count(self, team_id: uuid.UUID) -> int:
        with self._lock:
            return self._teams[team_id]


def uploads_in_flight(request: Request, team_id: uuid.UUID) -> int:
    uploads: UploadsInFlight = request.app.state.uploads
    return uploads.count(team_id)


async def run_upload(func: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """Run the synchronous consumer of an upload's file in an upload thread (it pulls the file with
    `file_chunks`), in the request's context: its log lines carry the request's id."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(
        UPLOAD_THREADS, context.run, functools.partial(func, *args, **kwargs))


class MultipartUpload:
    """The fields and the file of one multipart/form-data request, read once, in order."""

    def __init__(self, request: Request, before_file: Collection[str] = (), file_field: str = "file") -> None:
        media_type, options = parse_options_header(request.headers.get("content-type"))
        if media_type != b"multipart/form-data" or not options.get(b"boundary"):
            raise InvalidInput(f"the body must be multipart/form-data, its file in a part named '{file_field}'",
                               field="body")
        self.file_field, self.before_file = file_field, before_file
        self.fields: dict[str, str] = {}
        self.filename: str | None = None  # the file part's, as the client names it
        self.streams = False  # the file started after `before_file`: no field may follow it
        # The way back to this event loop for whichever thread pulls the file (boto3 reads in its own).
        self._loop = anyio.lowlevel.current_token()
        self._body: AsyncIterator[bytes] = request.stream().__aiter__()
        self._parser = MultipartParser(options[b"boundary"], callbacks={
            "on_part_begin": self._part_begin, "on_header_field": self._header_field,
            "on_header_value": self._header_value, "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished, "on_part_data": self._part_data,
            "on_part_end": self._part_end, "on_end": self._end})
        self._parts = 0
        self._header: list[bytes] = [b"", b""]  # name, value of the header being read
        self._disposition = b""
        self._name: str | None = None  # of the part being read
        self._value: list[bytes] = []  # a field's bytes so far
        self._value_bytes = 0
        self._file: list[memoryview] = []  # file bytes not yet handed on
        self._file_bytes = 0
        self._file_state = "ahead"  # then "reading", then "read"
        self._ended = False

    async def read_fields(self) -> dict[str, str]:
        """Read the body up to the file's first byte: the fields before it."""
        while self._file_state == "ahead" and not self._ended:
            await self._read()
        if self._file_state == "ahead":
            raise InvalidInput(f"'{self.file_field}' is required: the file to upload", field=self.file_field)
        return self.fields

    def file_chunks(self) -> Iterator[bytes]:
        """The file's bytes, about a megabyte at a time, for a thread other than the event loop's."""
        while piece := anyio.from_thread.run(self._next_piece, token=self._loop):
            yield piece

    def spooled_file(self) -> BinaryIO:
        """The whole file, spooled, with the fields after it read into `fields`: for a thread other than the loop's."""
        spool = tempfile.SpooledTemporaryFile(max_size=CHUNK)
        try:
            for piece in self.file_chunks():
                spool.write(piece)
        except BaseException:
            spool.close()
            raise
        spool.seek(0)
        return cast(BinaryIO, spool)  # binary (the spool's default mode, w+b); typeshed types it IO[bytes]

    async def _next_piece(self) -> bytes:
        while self._file_bytes < CHUNK and self._file_state == "reading":
            await self._read()
        piece = b"".join(self._file)
        self._file, self._file_bytes = [], 0
        while self._file_state == "read" and not self._ended:  # what follows the file: fields, the closing boundary
            await self._read()
        return piece

    async def _read(self) -> None:
        # Feeds the parser the next message of the body; its callbacks do the rest.
        try:
            data = await anext(self._body)
        except StopAsyncIteration:
            raise InvalidInput("the multipart body ends before its closing boundary", field="body") from None
        except ClientDisconnect:  # no one to answer: refused like a body cut short, not logged as a fault
            raise InvalidInput("the client went away before the body ended", field="body") from None
        try:
            self._parser.write(data)
        except MultipartParseError as exc:
            raise InvalidInput(f"the multipart body is malformed: {exc}", field="body") from None

    # --- the parser's callbacks -----------------------------------------------------------

    def _part_begin(self) -> None:
        self._parts += 1
        if self._parts > MAX_PARTS:
            raise InvalidInput(f"the form holds more than {MAX_PARTS} parts", field="body")
        self._disposition, self._name = b"", None

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._header[0] += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        self._header[1] += data[start:end]

    def _header_end(self) -> None:
        name, value = self._header
        if name.lower() == b"content-disposition":
            self._disposition = value
        self._header = [b"", b""]

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        self._name = name = options.get(b"name", b"").decode("utf-8", "replace")
        if name == self.file_field:
            if self._file_state != "ahead":
                raise InvalidInput(f"the form holds more than one '{name}'", field=name)
            self._file_state = "reading"
            self.filename = options[b"filename"].decode("utf-8", "replace") if b"filename" in options else None
            self.streams = all(field in self.fields for field in self.before_file)
        elif self._file_state != "ahead" and self.streams:
            raise InvalidInput(f"'{name}' comes after the file: put the file last, after every field", field=name)
        self._value, self._value_bytes = [], 0

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._file_state == "reading":
            self._file.append(memoryview(data)[start:end])  # joined once per piece
            self._file_bytes += end - start
            return
        self._value_bytes += end - start
        if self._value_bytes > MAX_FIELD_BYTES:
            raise InvalidInput(f"'{self._name}' is longer than {MAX_FIELD_BYTES} bytes", field=self._name)
        self._value.append(data[start:end])

    def _part_end(self) -> None:
        if self._file_state == "reading":
            self._file_state = "read"
            return
        try:
            self.fields[self._name or ""] = b"".join(self._value).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput(f"'{self._name}' is not UTF-8 text", field=self._name) from None

    def _end(self) -> None:
        self._ended = True


async def ingest_upload(request: Request, upload: MultipartUpload, team: Team,
                        check: Callable[[MultipartUpload], None] | None = None) -> Corpus:
    """Read an upload's fields, `check` them, stream its file into a corpus of the team's, then queue its statistics.

    The team's concurrent_uploads quota is held from before the body's first byte until the row
    is in; no database session is open meanwhile (the core opens short ones).
    """
    quotas = await run_upload(team_quotas, request, team.id)  # cached; a read at most every few seconds
    with request.app.state.uploads.held(team.id, quotas.concurrent_uploads):
        await upload.read_fields()
        if check is not None:
            check(upload)
        corpus = await run_upload(_ingest, request, upload, team, quotas)
    await run_upload(request.app.state.queue.send_statistics, corpus.id)  # broker away: the sweeper sends it
    return corpus


def _ingest(request: Request, upload: MultipartUpload, team: Team, quotas: Quotas) -> Corpus:
    # In an upload thread: the file streams when it came after the fields the core needs first,
    # else it waits in a spool until the fields after it are read.
    state = request.app.state
    limits = {"max_bytes": state.settings.max_upload_bytes, "max_line_bytes": state.settings.max_line_bytes}
    if upload.streams:
        return ingest_corpus(state.sessionmaker, state.store, team, _fields(upload), upload.file_chunks(),
                             quotas=quotas, turns=COMPUTING, **limits)
    with upload.spooled_file() as spool:
        return ingest_corpus(state.sessionmaker, state.store, team, _fields(upload), read_into(spool),
                             quotas=quotas, turns=COMPUTING, **limits)


def _fields(upload: MultipartUpload) -> CorpusFields:
    return CorpusFields.from_form(upload.fields, upload.filename)
