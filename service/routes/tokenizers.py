"""/v1/tokenizers: names, versions (trained or imported), metadata, files and bundles
(service/downloads.py), the encode playground and the cost report."""

import json
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from service.deps import (
    ExpensiveTeamDep,
    PageDep,
    QueueDep,
    SessionDep,
    SessionmakerDep,
    SettingsDep,
    StoreDep,
    TeamDep,
    team_quotas,
)
from service.downloads import MEDIA_TYPES, bundle_response, file_response
from service.parameters import NamePath, VersionPath
from service.schemas import EncodeIn, EncodeOut, Listing, TokenizerOut, VersionOut, VocabularyOut
from service.schemas_evaluations import VersionEvaluationsOut
from service.schemas_report import CostReportOut
from service.uploads import FILE_PART, MultipartUpload, run_upload
from tokenmill.db import release, transaction
from tokenmill.errors import InvalidInput, TooLarge
from tokenmill.evaluation.reports import version_curve, version_evaluations
from tokenmill.evaluation.submission import submit_run
from tokenmill.jobs.submission import check_tokenizer_name
from tokenmill.models import Team, TokenizerVersion
from tokenmill.playground.cost_report import combine, evaluations_stamp, measured_costs, probed_costs
from tokenmill.playground.encode import encode_with_version
from tokenmill.playground.scripts import vocabulary_report
from tokenmill.versions.imports import import_version, parsed_import
from tokenmill.versions.registry import get_version, list_names, list_versions

router = APIRouter(prefix="/v1/tokenizers", tags=["tokenizers"])

BINARY = {"schema": {"type": "string", "format": "binary"}}
# What the downloads answer (service/downloads.py): a file's media type follows its suffix.
BUNDLE: dict[int | str, dict[str, Any]] = {
    200: {"description": "every file of the version under a folder named for it",
          "content": {"application/gzip": BINARY}}}
FILE: dict[int | str, dict[str, Any]] = {
    200: {"description": "one file of the version",
          "content": dict.fromkeys((*MEDIA_TYPES.values(), "application/octet-stream"), BINARY)}}


@router.get("", response_model=Listing[TokenizerOut])
def read_names(session: SessionDep, team: TeamDep, page: PageDep) -> dict[str, Any]:
    rows, total = list_names(session, team, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{name}/versions", response_model=Listing[VersionOut])
def read_versions(session: SessionDep, team: TeamDep, page: PageDep, name: NamePath) -> dict[str, Any]:
    rows, total = list_versions(session, team, name, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


# The body is read by the route itself (service/uploads.py), so the form is described here.
IMPORT_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {
        "pat_str": {"type": "string", "description": "a tiktoken rank file's split regex (required with one)"},
        "special_tokens": {"type": "string", "description": 'a tiktoken rank file\'s special tokens, as JSON: '
                                                            '{"<|endoftext|>": 100257}',
                           "contentMediaType": "application/json",
                           "contentSchema": {"type": "object", "additionalProperties": {"type": "integer"}}},
        "file": {**FILE_PART, "description": "a Hugging Face tokenizer.json, a sentencepiece model or a tiktoken rank "
                                             "file; sent after the fields, or before them all"},
    }}}}}}
IMPORT_FIELDS = ("pat_str", "special_tokens")


@router.post("/{name}/versions", status_code=201, response_model=VersionOut, openapi_extra=IMPORT_FORM)
async def import_tokenizer(request: Request, factory: SessionmakerDep, store: StoreDep, queue: QueueDep,
                           team: ExpensiveTeamDep, settings: SettingsDep, name: NamePath) -> TokenizerVersion:
    """A tokenizer the team uploads becomes the next version of `name`, evaluated on the team's corpora."""
    check_tokenizer_name(name)
    upload = MultipartUpload(request, before_file=IMPORT_FIELDS)
    await upload.read_fields()
    data = await run_upload(_bounded_file, upload, settings.max_import_bytes)
    fields = upload.fields
    imported = await run_in_threadpool(parsed_import, data, fields.get("pat_str") or None,
                                       _special_tokens(fields.get("special_tokens")), str(team.id))
    row = await run_in_threadpool(import_version, factory, store, team.id, name, imported, upload.filename, data)
    run_id = await run_in_threadpool(_queue_evaluation, request, factory, team, row)
    if run_id is not None:
        await run_in_threadpool(queue.send_evaluation, run_id)  # if the broker is away, the sweeper sends it
    return row


def _bounded_file(upload: MultipartUpload, limit: int) -> bytes:
    """The uploaded file's bytes, refused (413 naming `file`) past `limit`."""
    pieces, size = [], 0
    chunks = upload.file_chunks() if upload.streams else _spooled_chunks(upload)
    for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"file: an imported tokenizer may hold at most {limit} bytes", field="file")
        pieces.append(chunk)
    if not size:
        raise InvalidInput("file: the upload is empty; send the tokenizer file in a part named 'file'", field="file")
    return b"".join(pieces)


def _spooled_chunks(upload: MultipartUpload) -> Iterator[bytes]:
    with upload.spooled_file() as spool:
        while chunk := spool.read(1 << 20):
            yield chunk


def _special_tokens(raw: str | None) -> dict[str, int] | None:
    if not raw:
        return None
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict) or not all(isinstance(k, str) and type(v) is int for k, v in value.items()):
        raise InvalidInput('special_tokens: a JSON object of token to id, e.g. {"<|endoftext|>": 100257}',
                           field="special_tokens")
    return value


def _queue_evaluation(request: Request, factory: sessionmaker[Session], team: Team,
                      row: TokenizerVersion) -> uuid.UUID | None:
    """An evaluation run of the imported version on all of the team's corpora (none: no run)."""
    with transaction(factory) as session:
        try:
            run = submit_run(session, team, row.name, row.version, None, None,
                             team_quotas(request, team.id).queued_jobs)
        except InvalidInput:  # no corpora yet: the version is evaluated when a run is asked for
            return None
        return run.id


@router.get("/{name}/versions/{version}", response_model=VersionOut)
def read_version(session: SessionDep, team: TeamDep, name: NamePath, version: VersionPath) -> TokenizerVersion:
    return get_version(session, team, name, version)


@router.get("/{name}/versions/{version}/bundle.tar.gz", response_class=Response, responses=BUNDLE)
def download_bundle(session: SessionDep, store: StoreDep, team: TeamDep, name: NamePath,
                    version: VersionPath) -> Response:
    return bundle_response(store, get_version(session, team, name, version))


@router.get("/{name}/versions/{version}/files/{filename}", response_class=Response, responses=FILE)
def download_file(session: SessionDep, store: StoreDep, team: TeamDep, name: NamePath, version: VersionPath,
                  filename: str) -> StreamingResponse:
    return file_response(store, get_version(session, team, name, version), filename)


@router.get("/{name}/versions/{version}/evaluations", response_model=VersionEvaluationsOut)
def read_evaluations(session: SessionDep, team: TeamDep, name: NamePath, version: VersionPath) -> dict[str, Any]:
    row = get_version(session, team, name, version)
    return {"name": row.name, "version": row.version, "items": version_evaluations(session, team, row),
            "vocab_curve": version_curve(session, team, row)}


@router.post("/{name}/versions/{version}/encode", response_model=EncodeOut)
def encode(request: Request, body: EncodeIn, session: SessionDep, store: StoreDep, team: ExpensiveTeamDep,
           name: NamePath, version: VersionPath) -> dict[str, Any]:
    row = get_version(session, team, name, version)
    release(session)  # the encode may take its whole time limit
    return encode_with_version(store, row, body.text, body.sampling)


@router.get("/{name}/versions/{version}/report", response_model=CostReportOut)
def read_report(session: SessionDep, store: StoreDep, team: ExpensiveTeamDep, name: NamePath,
                version: VersionPath) -> Response:
    """What the version costs next to GPT-2, cl100k_base and o200k_base (tokenmill.playground.cost_report)."""
    row = get_version(session, team, name, version)
    key = (row.id, evaluations_stamp(session, team))
    if (kept := _REPORTS.get(key)) is not None:
        return Response(kept, media_type="application/json")
    measured = measured_costs(session, store, team, row)
    release(session)  # the probes' sandbox encodes may take their time limit
    report = CostReportOut.model_validate(combine(measured, probed_costs(store, row)))
    body = report.model_dump_json(by_alias=True).encode()
    if not report.unavailable:  # a probe cut short is tried again next time
        _REPORTS.put(key, body)
    return Response(body, media_type="application/json")


class _Kept:
    """The last few reports as sent: a report asked for in a loop is bytes, not a computation."""

    def __init__(self, size: int) -> None:
        self.size, self._items = size, OrderedDict[tuple[Any, ...], bytes]()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...]) -> bytes | None:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
            return self._items.get(key)

    def put(self, key: tuple[Any, ...], body: bytes) -> None:
        with self._lock:
            self._items[key] = body
            while len(self._items) > self.size:
                self._items.popitem(last=False)


_REPORTS = _Kept(64)


@router.get("/{name}/versions/{version}/vocabulary", response_model=VocabularyOut)
def read_vocabulary(session: SessionDep, store: StoreDep, team: ExpensiveTeamDep, name: NamePath,
                    version: VersionPath) -> dict[str, object]:
    row = get_version(session, team, name, version)
    release(session)  # counting may take a sandbox process's while
    return vocabulary_report(store, row)
