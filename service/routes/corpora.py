"""/v1/corpora: streamed upload, list, read, delete."""

import uuid

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from service.deps import PageDep, QueueDep, SessionDep, SessionmakerDep, SettingsDep, StoreDep, TeamDep
from service.schemas import CorpusOut, Listing
from service.uploads import MultipartUpload, run_upload
from tokenmill.corpora import rows as corpus_rows
from tokenmill.corpora.ingest import NAMED_FIELDS, CorpusFields, ingest_corpus
from tokenmill.corpora.reading import FORMATS
from tokenmill.models import Corpus
from tokenmill.pagination import paginate
from tokenmill.store import ObjectStore, read_into

router = APIRouter(prefix="/v1/corpora", tags=["corpora"])


# The body is read by the route itself (service/uploads.py), so the form is described here.
UPLOAD_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["name", "domain", "language", "file"],
    "properties": {
        **{name: {"type": "string"} for name in ("name", "domain", "language", "text_field", "parallel_group")},
        "format": {"type": "string", "enum": list(FORMATS),
                   "description": "Not given: jsonl for a file named .jsonl or .ndjson (.gz, .zst too), otherwise "
                                  "text, but a file whose first non-blank line is a JSON object is refused (422) "
                                  "with a hint to say format=jsonl (or format=text)."},
        "file": {"type": "string", "format": "binary",
                 "description": "UTF-8 text or JSON lines; gzip and zstd are recognised. Sent after the other "
                                "fields, it streams; sent before them, it is spooled until they arrive."},
    }}}}}}


@router.post("", status_code=201, response_model=CorpusOut, openapi_extra=UPLOAD_FORM)
async def upload_corpus(request: Request, factory: SessionmakerDep, store: StoreDep, queue: QueueDep, team: TeamDep,
                        settings: SettingsDep):
    # The fields are read first; with them, the file streams from the request to the store through
    # ingest_corpus in an upload thread (fields after the file: it is spooled until they are read).
    # No database session is open meanwhile: the row is inserted in a short transaction after.
    upload = MultipartUpload(request, before_file=NAMED_FIELDS)
    form = await upload.read_fields()
    limits = {"max_bytes": settings.max_upload_bytes, "max_line_bytes": settings.max_line_bytes}
    if upload.streams:
        corpus = await run_upload(ingest_corpus, factory, store, team, _fields(form, upload.filename),
                                  upload.file_chunks(), **limits)
    else:
        corpus = await run_upload(_ingest_spooled, upload, factory, store, team, limits)
    await run_in_threadpool(queue.send_statistics, corpus.id)  # if the broker is away, the sweeper sends it
    return corpus


def _fields(form: dict[str, str], filename: str | None) -> CorpusFields:
    # No format (or an empty one): the file's name or its first line decides (tokenmill/corpora/ingest.py).
    return CorpusFields(name=form.get("name", ""), domain=form.get("domain", ""), language=form.get("language", ""),
                        format=form.get("format") or None, text_field=form.get("text_field") or None,
                        parallel_group=form.get("parallel_group") or None, filename=filename)


def _ingest_spooled(upload: MultipartUpload, factory, store: ObjectStore, team, limits: dict[str, int]) -> Corpus:
    with upload.spooled_file() as spool:
        return ingest_corpus(factory, store, team, _fields(upload.fields, upload.filename), read_into(spool), **limits)


@router.get("", response_model=Listing[CorpusOut])
def list_corpora(session: SessionDep, team: TeamDep, page: PageDep, domain: str | None = None, language: str | None = None):
    query = select(Corpus).where(Corpus.team_id == team.id)
    if domain:
        query = query.where(Corpus.domain == domain)
    if language:
        query = query.where(Corpus.language == language)
    rows, total = paginate(session, query.order_by(Corpus.created_at.desc()), page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{corpus_id}", response_model=CorpusOut)
def read_corpus(session: SessionDep, team: TeamDep, corpus_id: uuid.UUID):
    return corpus_rows.get_corpus(session, team, corpus_id)


@router.delete("/{corpus_id}", status_code=204)
def delete_corpus(session: SessionDep, store: StoreDep, team: TeamDep, corpus_id: uuid.UUID):
    corpus_rows.delete_corpus(session, store, team, corpus_id)
    return Response(status_code=204)
