"""Word statistics of an uploaded corpus, computed by a worker right after the upload.

They need one counter entry per distinct word (see statistics.py), which would make the
API's memory grow with the corpus; a worker streams the stored corpus instead, and the
corpus row shows `statistics: null` until it is done.
"""

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.reading import corpus_documents
from tokenmill.corpora.statistics import CorpusStatistics
from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.models import Corpus
from tokenmill.store import ObjectStore
from tokenmill.work.lifecycle import Heartbeat, WorkLimits


def corpus_statistics(store: ObjectStore, corpus: Corpus) -> dict[str, Any]:
    """Distinct words, hapax share, Zipf, Heaps, OOV of the last tenth, and the points to plot."""
    statistics = CorpusStatistics(total_lines=corpus.lines)
    for document in corpus_documents(store, corpus):
        statistics.add(document)
    return {**statistics.result(), "zipf_points": statistics.zipf_points(), "heaps_points": statistics.heaps_points()}


def record_statistics(factory: sessionmaker[Session], store: ObjectStore, corpus_id: uuid.UUID,
                      limits: WorkLimits) -> bool:
    """Compute and store a corpus's statistics; False if it is gone, already has them, or another
    worker holds a live claim on them (one touched in the last `silent_after` seconds: the
    claim beats like a job's). A failure gives the claim back, for the sweeper to send the
    task again."""
    now = utcnow()
    with transaction(factory) as session:
        claimed = rowcount(session.execute(
            update(Corpus).where(Corpus.id == corpus_id, Corpus.statistics.is_(None),
                                 or_(Corpus.statistics_claimed_at.is_(None),
                                     Corpus.statistics_claimed_at < now - timedelta(seconds=limits.silent_after)))
            .values(statistics_claimed_at=now)
        ))
    if not claimed:
        return False

    def touch(session: Session) -> bool:
        return rowcount(session.execute(update(Corpus).where(Corpus.id == corpus_id, Corpus.statistics.is_(None))
                                        .values(statistics_claimed_at=utcnow()))) == 1

    try:
        with Heartbeat(factory, touch, limits):
            with factory() as session:
                corpus = session.get_one(Corpus, corpus_id)
            result = corpus_statistics(store, corpus)
    except BaseException:
        with transaction(factory) as session:
            session.execute(update(Corpus).where(Corpus.id == corpus_id).values(statistics_claimed_at=None))
        raise
    with transaction(factory) as session:
        session.execute(update(Corpus).where(Corpus.id == corpus_id).values(statistics=result))
    return True
