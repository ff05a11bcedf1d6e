"""/v1/corpora: streamed upload, list, read, delete, and the exact duplicates across the team's corpora."""

import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from service.deps import ExpensiveTeamDep, PageDep, SessionDep, SettingsDep, StoreDep, TeamDep
from service.schemas import CorpusOut, DuplicatesOut, Listing
from service.uploads import MultipartUpload, ingest_upload
from tokenmill.corpora import rows as corpus_rows
from tokenmill.corpora.duplicates import TeamDuplicates, hashed_corpora, team_duplicates
from tokenmill.corpora.ingest import NAMED_FIELDS
from tokenmill.corpora.reading import FORMATS
from tokenmill.db import release
from tokenmill.models import Corpus
from tokenmill.pagination import paginate

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
async def upload_corpus(request: Request, team: ExpensiveTeamDep) -> Corpus:
    # The fields are read first; with them, the file streams from the request to the store in an
    # upload thread (fields after the file: it is spooled until they are read), under the team's
    # quotas: the same path as the dashboard's form (service/uploads.py).
    return await ingest_upload(request, MultipartUpload(request, before_file=NAMED_FIELDS), team)


@router.get("", response_model=Listing[CorpusOut])
def list_corpora(session: SessionDep, team: TeamDep, page: PageDep, domain: str | None = None,
                 language: str | None = None) -> dict[str, Any]:
    rows, total = paginate(session, corpus_rows.newest_corpora(team.id, domain, language), page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/duplicates", response_model=DuplicatesOut)
def read_duplicates(session: SessionDep, store: StoreDep, settings: SettingsDep,
                    team: ExpensiveTeamDep) -> TeamDuplicates:
    """The share of the team's documents that are exact duplicates, within a corpus or across corpora; merged
    from the stored hashes of the corpora whose statistics are ready, up to TOKENMILL_DUPLICATES_MAX_DOCUMENTS."""
    corpora = hashed_corpora(session, team.id)
    release(session)  # the merge reads the store
    return team_duplicates(store, corpora, settings.duplicates_max_documents)


@router.get("/{corpus_id}", response_model=CorpusOut)
def read_corpus(session: SessionDep, team: TeamDep, corpus_id: uuid.UUID) -> Corpus:
    return corpus_rows.get_corpus(session, team, corpus_id)


@router.delete("/{corpus_id}", status_code=204)
def delete_corpus(session: SessionDep, store: StoreDep, team: TeamDep, corpus_id: uuid.UUID) -> Response:
    corpus_rows.delete_corpus(session, store, team, corpus_id, lambda: release(session))
    return Response(status_code=204)
