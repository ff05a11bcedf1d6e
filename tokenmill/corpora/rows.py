"""A team's corpus rows: find one, delete one, look up the ones a request names. The API, the
dashboard and the workers call these."""

import logging
import uuid
from collections.abc import Callable, Sequence

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from tokenmill.corpora.duplicates import hashes_key
from tokenmill.errors import InvalidInput, NotFound
from tokenmill.models import Corpus, Team
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)


def newest_corpora(team_id: uuid.UUID, domain: str | None = None, language: str | None = None) -> Select[Corpus]:
    """The query of the team's corpora, newest first (of one domain or language if given): to
    page, to cut short or to read whole. Every list of a team's corpora starts here."""
    query = select(Corpus).where(Corpus.team_id == team_id)
    if domain:
        query = query.where(Corpus.domain == domain)
    if language:
        query = query.where(Corpus.language == language)
    return query.order_by(Corpus.created_at.desc())


def get_corpus(session: Session, team: Team, corpus_id: uuid.UUID) -> Corpus:
    """The team's corpus; another team's, or none, is NotFound (a 404: ids are not disclosed)."""
    corpus = session.get(Corpus, corpus_id)
    if corpus is None or corpus.team_id != team.id:
        raise NotFound(f"no corpus {corpus_id}")
    return corpus


def delete_corpus(session: Session, store: ObjectStore, team: Team, corpus_id: uuid.UUID,
                  release: Callable[[], None]) -> Corpus:
    """Delete the row, `release` the session (committing it), then delete its object and its
    statistics' document hashes; returns the deleted row.

    Once the row is committed the corpus is deleted, whatever the store answers: an object left
    behind is an orphan, which the sweeper's reconciliation removes."""
    corpus = get_corpus(session, team, corpus_id)
    session.delete(corpus)
    release()
    _forget(store.delete_prefix, corpus.storage_key)
    _forget(store.delete, hashes_key(corpus.team_id, corpus.id))
    return corpus


def _forget(delete: Callable[[str], None], key: str) -> None:
    """Delete a deleted corpus's object; a store that fails leaves it to the reconciliation."""
    try:
        delete(key)
    except Exception as exc:  # any store failure: logged, the corpus stays deleted
        log.warning("corpus object %s left in the store (reconciliation removes it): %s: %s",
                    key, type(exc).__name__, exc)


def parse_ids(values: Sequence[str], field: str) -> list[uuid.UUID]:
    try:
        return [uuid.UUID(str(value)) for value in values]
    except ValueError:
        raise InvalidInput(f"'{field}' must be a list of corpus ids", field=field) from None


def named_corpora(session: Session, team: Team, ids: Sequence[uuid.UUID], field: str) -> list[Corpus]:
    """The team's corpora with these ids, in order; an unknown or foreign id is a 422 naming the field."""
    rows = {c.id: c for c in session.scalars(select(Corpus).where(Corpus.team_id == team.id, Corpus.id.in_(ids)))}
    missing = [str(i) for i in ids if i not in rows]
    if missing:
        raise InvalidInput(f"'{field}' names unknown corpora: {', '.join(missing)}", field=field)
    return [rows[i] for i in ids]


def existing_corpora(session: Session, ids: Sequence[str]) -> list[Corpus]:
    """The corpora with these ids that still exist (deleted ones are skipped), in the given order."""
    wanted = [uuid.UUID(i) for i in ids]
    rows = {c.id: c for c in session.scalars(select(Corpus).where(Corpus.id.in_(wanted)))}
    return [rows[i] for i in wanted if i in rows]


def corpus_ids_or_all(session: Session, team: Team, values: Sequence[str] | None, field: str) -> list[uuid.UUID]:
    """The ids of the named corpora (checked as `named_corpora` does), or of all the team's, oldest first."""
    if values is None:
        return list(session.scalars(select(Corpus.id).where(Corpus.team_id == team.id).order_by(Corpus.created_at)))
    return [c.id for c in named_corpora(session, team, parse_ids(values, field), field)]
