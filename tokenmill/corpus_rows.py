"""A team's corpus rows: find one, delete one. The API and the dashboard both call these."""

import logging
import uuid

from sqlalchemy.orm import Session

from tokenmill.errors import NotFound
from tokenmill.models import Corpus, Team
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)


def get_corpus(session: Session, team: Team, corpus_id: uuid.UUID) -> Corpus:
    """The team's corpus; another team's, or none, is NotFound (a 404: ids are not disclosed)."""
    corpus = session.get(Corpus, corpus_id)
    if corpus is None or corpus.team_id != team.id:
        raise NotFound(f"no corpus {corpus_id}")
    return corpus


def delete_corpus(session: Session, store: ObjectStore, team: Team, corpus_id: uuid.UUID) -> Corpus:
    """Delete the row (committed), then its object; returns the deleted row.

    Once the row is committed the corpus is deleted, whatever the store answers: an object left
    behind is an orphan, which the sweeper's reconciliation removes."""
    corpus = get_corpus(session, team, corpus_id)
    session.delete(corpus)
    session.commit()
    try:
        store.delete_prefix(corpus.storage_key)
    except Exception as exc:  # any store failure: logged, the corpus stays deleted
        log.warning("corpus object %s left in the store (reconciliation removes it): %s: %s",
                    corpus.storage_key, type(exc).__name__, exc)
    return corpus
