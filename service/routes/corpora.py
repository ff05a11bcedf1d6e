"""/v1/corpora: streamed upload, list, read, delete, and the exact duplicates across the team's corpora."""

import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.convertors import StringConvertor, register_url_convertor

from service.deps import ExpensiveTeamDep, PageDep, SessionDep, SettingsDep, StoreDep, TeamDep
from service.inputs import NOT_BLANK
from service.schemas import CorpusOut, DuplicatesOut, Listing
from service.uploads import FILE_PART, MultipartUpload, ingest_upload
from tokenmill.corpora import rows as corpus_rows
from tokenmill.corpora.duplicates import TeamDuplicates, hashed_corpora, team_duplicates
from tokenmill.corpora.ingest import MAX_FIELD_LENGTH, NAMED_FIELDS, OPTIONAL_FIELDS
from tokenmill.corpora.reading import FORMATS
from tokenmill.db import release
from tokenmill.models import Corpus
from tokenmill.pagination import paginate

router = APIRouter(prefix="/v1/corpora", tags=["corpora"])


class CorpusId(StringConvertor):
    """A corpus id in a path: any segment but `duplicates`, the resource beside the corpora, so that a method
    it does not answer (DELETE) is a 405, not an id refused. An id that is no UUID stays a 422 naming it."""

    regex = "(?!duplicates$)[^/]+"


register_url_convertor("corpus_id", CorpusId())


# The body is read by the route itself (service/uploads.py), so the form is described here, its fields as
# CorpusFields.validate takes them (stripped of spaces): a named one holds more than spaces.
NAMED_FIELD = {"type": "string", "maxLength": MAX_FIELD_LENGTH, "pattern": NOT_BLANK}
UPLOAD_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["name", "domain", "language", "file"],
    # text_field names the text of each JSON line: with format=jsonl only.
    "anyOf": [{"properties": {"text_field": {"type": "string", "pattern": "^\\s*$"}}},
              {"required": ["format"], "properties": {"format": {"const": "jsonl"}}}],
    "properties": {
        **dict.fromkeys(NAMED_FIELDS, NAMED_FIELD),
        **{name: {"type": "string", "maxLength": MAX_FIELD_LENGTH} for name in OPTIONAL_FIELDS},
        "format": {"type": "string", "enum": [*FORMATS, ""],
                   "description": "Not given (or empty): jsonl for a file named .jsonl or .ndjson (.gz, .zst too), "
                                  "otherwise text, but a file whose first non-blank line is a JSON object is refused "
                                  "(422) with a hint to say format=jsonl (or format=text)."},
        "file": {**FILE_PART,
                 "description": "UTF-8 text or JSON lines; gzip and zstd are recognised. Sent after the other "
                                "fields, it streams; sent before them, it is spooled until they arrive. Once it "
                                "streams, a field after it is refused (422): send the file last."},
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


@router.get("/{corpus_id:corpus_id}", response_model=CorpusOut)
def read_corpus(session: SessionDep, team: TeamDep, corpus_id: uuid.UUID) -> Corpus:
    return corpus_rows.get_corpus(session, team, corpus_id)


@router.delete("/{corpus_id:corpus_id}", status_code=204)
def delete_corpus(session: SessionDep, store: StoreDep, team: TeamDep, corpus_id: uuid.UUID) -> Response:
    corpus_rows.delete_corpus(session, store, team, corpus_id, lambda: release(session))
    return Response(status_code=204)
