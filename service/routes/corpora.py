"""/v1/corpora: streamed upload, list, read, delete."""

import logging
import uuid
from typing import Annotated

from fastapi import APIRouter, File, Form, UploadFile
from fastapi.responses import Response
from sqlalchemy import select

from service.deps import PageDep, QueueDep, SessionDep, SessionmakerDep, SettingsDep, StoreDep, TeamDep
from service.schemas import CorpusOut, Listing
from tokenmill.errors import NotFound
from tokenmill.ingest import CorpusFields, ingest_corpus
from tokenmill.models import Corpus
from tokenmill.pagination import paginate
from tokenmill.store import ObjectStore, read_into

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/corpora", tags=["corpora"])


def get_corpus(session, team, corpus_id: uuid.UUID) -> Corpus:
    corpus = session.get(Corpus, corpus_id)
    if corpus is None or corpus.team_id != team.id:
        raise NotFound(f"no corpus {corpus_id}")
    return corpus


@router.post("", status_code=201, response_model=CorpusOut)
def upload_corpus(
    factory: SessionmakerDep,
    store: StoreDep,
    queue: QueueDep,
    team: TeamDep,
    settings: SettingsDep,
    file: Annotated[UploadFile, File(description="UTF-8 text or JSON lines; gzip and zstd are recognised")],
    name: Annotated[str, Form()],
    domain: Annotated[str, Form()],
    language: Annotated[str, Form()],
    format: Annotated[str, Form()] = "text",
    text_field: Annotated[str | None, Form()] = None,
    parallel_group: Annotated[str | None, Form()] = None,
):
    # The multipart parser spools the file to disk past 1 MiB; from there it streams to the store,
    # with no database session open (ingest_corpus inserts the row in a short transaction after).
    fields = CorpusFields(name=name, domain=domain, language=language, format=format,
                          text_field=text_field or None, parallel_group=parallel_group or None)
    corpus = ingest_corpus(factory, store, team, fields, read_into(file.file),
                           max_bytes=settings.max_upload_bytes, max_line_bytes=settings.max_line_bytes)
    queue.send_statistics(corpus.id)  # if the broker is away, the sweeper sends it
    return corpus


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
    return get_corpus(session, team, corpus_id)


@router.delete("/{corpus_id}", status_code=204)
def delete_corpus(session: SessionDep, store: StoreDep, team: TeamDep, corpus_id: uuid.UUID):
    corpus = get_corpus(session, team, corpus_id)
    key = corpus.storage_key
    session.delete(corpus)
    session.commit()
    _delete_object(store, key)
    return Response(status_code=204)


def _delete_object(store: ObjectStore, key: str) -> None:
    # The row is gone and committed: whatever the store answers, the corpus is deleted. An
    # object left behind is an orphan, which the sweeper's reconciliation pass removes.
    try:
        store.delete_prefix(key)
    except Exception as exc:  # any store failure: log it, the answer stays 204
        log.warning("corpus object %s left in the store (reconciliation removes it): %s: %s",
                    key, type(exc).__name__, exc)
