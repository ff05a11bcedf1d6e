"""Word statistics of an uploaded corpus, computed by a worker right after the upload.

They need one counter entry per distinct word (see statistics.py), which would make the
API's memory grow with the corpus; a worker streams the stored corpus instead, and the
corpus row shows `statistics: null` until it is done.
"""

import uuid
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora import corpus_documents
from tokenmill.db import transaction
from tokenmill.models import Corpus
from tokenmill.statistics import CorpusStatistics
from tokenmill.store import ObjectStore


def corpus_statistics(store: ObjectStore, corpus: Corpus) -> dict[str, Any]:
    """Distinct words, hapax share, Zipf, Heaps, OOV of the last tenth, and the points to plot."""
    statistics = CorpusStatistics(total_lines=corpus.lines)
    for document in corpus_documents(store, corpus):
        statistics.add(document)
    return {**statistics.result(), "zipf_points": statistics.zipf_points(), "heaps_points": statistics.heaps_points()}


def record_statistics(factory: sessionmaker[Session], store: ObjectStore, corpus_id: uuid.UUID) -> bool:
    """Compute and store a corpus's statistics; False if it is gone or already has them."""
    with factory() as session:
        corpus = session.get(Corpus, corpus_id)
    if corpus is None or corpus.statistics is not None:
        return False
    result = corpus_statistics(store, corpus)
    with transaction(factory) as session:
        session.execute(update(Corpus).where(Corpus.id == corpus_id).values(statistics=result))
    return True
