"""Word statistics of an uploaded corpus, computed by a worker right after the upload.

They need one counter entry per distinct word (see statistics.py), which would make the
API's memory grow with the corpus; a worker streams the stored corpus instead, and the
corpus row shows `statistics: null` until it is done. The same pass counts the exact-duplicate
documents and stores the hashes of the distinct ones beside the corpus (tokenmill.corpora.duplicates),
before the statistics are recorded; an attempt whose corpus was deleted meanwhile removes them.

They end as a job does: a claim counted by attempt (tokenmill/queued_work/claims.py: the corpus's
`statistics_claimed_at`, touched by the heartbeat), the job's memory guard and time limits, and
`statistics_error` with a reason a person can act on when they cannot be computed. A transient
fault gives the claim back for the sweeper to send the task again. A task message computes the
fair next corpus of any team (tokenmill/queued_work/scheduling.py), or takes over its own corpus if
that one's claim fell silent.
"""

import logging
import uuid
from typing import Any

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.duplicates import hashes_key, store_hashes
from tokenmill.corpora.reading import corpus_documents
from tokenmill.corpora.statistics import CorpusStatistics
from tokenmill.db import rowcount, transaction
from tokenmill.models import Corpus
from tokenmill.queued_work.claims import CORPUS_STATISTICS, Claimed, claim_by_id, in_attempt
from tokenmill.queued_work.heartbeat import Heartbeat
from tokenmill.queued_work.lifecycle import TRANSIENT, WORKER_DIED, unavailable
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.scheduling import STATISTICS, Wake, claim_in_turn, wake_team_of
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)

TIME_LIMIT = ("its statistics ran past the time limit (TOKENMILL_JOB_SOFT_TIME_LIMIT): a corpus of very many "
              "lines; its jobs may still train on it")

# They hold one entry per distinct word (statistics.py).
MEMORY_ADVICE = "its statistics count every distinct word: upload it in parts, or ask for a larger limit"


def corpus_statistics(store: ObjectStore, corpus: Corpus) -> dict[str, Any]:
    """Distinct words, hapax share, Zipf, Heaps, OOV of the last tenth, exact duplicates, and the points
    to plot; the distinct documents' hashes are stored under `hashes_key`."""
    statistics = CorpusStatistics(total_lines=corpus.lines)
    for document in corpus_documents(store, corpus):
        statistics.add(document)
    result = {**statistics.result(), "zipf_points": statistics.zipf_points(), "heaps_points": statistics.heaps_points()}
    store_hashes(store, hashes_key(corpus.team_id, corpus.id), statistics.document_hashes())
    return result


def record_statistics(factory: sessionmaker[Session], store: ObjectStore, corpus_id: uuid.UUID,
                      limits: WorkLimits, claimant: str | None = None) -> bool:
    """Compute and store this corpus's statistics, whatever the turn; False if it is gone, already
    has them (or failed them), or another worker holds a live claim on them (one touched in the
    last `silent_after` seconds: the claim beats like a job's)."""
    claimed = _claim(factory, corpus_id, limits, claimant)
    return claimed is not None and _compute(factory, store, claimed, limits)


def run_next_statistics(factory: sessionmaker[Session], store: ObjectStore, corpus_id: uuid.UUID, limits: WorkLimits,
                        claimant: str | None = None, wake: Wake | None = None) -> bool:
    """What a task message for `corpus_id` does: take that corpus over if its claim fell silent,
    else compute the fair next corpus of any team; True if statistics were stored. Then, if
    that corpus's team has more waiting, `wake` sends a message for the oldest of them."""
    claimed = claim_in_turn(factory, STATISTICS, corpus_id, limits, claimant, lambda dead: _worker_died(factory, dead))
    if claimed is None:
        return False
    recorded = _compute(factory, store, claimed, limits)
    if wake is not None:
        wake_team_of(factory, STATISTICS, claimed.row_id, wake)
    return recorded


def abandon_statistics(factory: sessionmaker[Session], claimant: str) -> None:
    """Fail the statistics a killed worker process was computing (hard time limit), found by the
    task that claimed them."""
    with factory() as session:
        row = session.execute(select(Corpus.id, Corpus.statistics_attempts)
                              .where(Corpus.statistics_claimed_by == claimant, Corpus.statistics.is_(None))
                              .order_by(Corpus.statistics_claimed_at.desc()).limit(1)).first()
    if row is not None:
        _end(factory, Claimed(row.id, row.statistics_attempts), TIME_LIMIT)


def _claim(factory: sessionmaker[Session], corpus_id: uuid.UUID, limits: WorkLimits,
           claimant: str | None) -> Claimed | None:
    """Claim this corpus's statistics if nobody holds a claim or its claim fell silent, counting
    the attempt; past its attempts they are failed instead."""
    return claim_by_id(factory, CORPUS_STATISTICS, corpus_id, limits.max_attempts, limits.silent_after, claimant,
                       lambda dead: _worker_died(factory, dead))


def _ours(claimed: Claimed) -> ColumnElement[bool]:
    # The corpus, while this attempt computes its statistics.
    return in_attempt(CORPUS_STATISTICS, Corpus.id == claimed.row_id, claimed.attempt)


def _compute(factory: sessionmaker[Session], store: ObjectStore, claimed: Claimed, limits: WorkLimits) -> bool:
    corpus: Corpus | None = None

    def stop() -> None:  # the claim is gone: what this attempt stored goes if the corpus went
        if corpus is not None:
            _forget_hashes_if_deleted(factory, store, corpus)

    heartbeat = Heartbeat.of_claim(factory, CORPUS_STATISTICS, Corpus.id == claimed.row_id, claimed.attempt, limits,
                                   lambda message: _end(factory, claimed, message), stop, MEMORY_ADVICE)
    try:
        with heartbeat:
            with factory() as session:
                corpus = session.get(Corpus, claimed.row_id)
            if corpus is None:
                return False  # deleted meanwhile
            result = corpus_statistics(store, corpus)
    except TRANSIENT as exc:
        if claimed.attempt >= limits.max_attempts:
            _end(factory, claimed, f"gave up after {claimed.attempt} attempts: {unavailable(exc)}")
            return False
        _give_back(factory, claimed)
        raise
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            _give_back(factory, claimed)
            raise
        log.exception("statistics of corpus %s failed", claimed.row_id)
        _end(factory, claimed, _reason(exc))
        return False
    with transaction(factory) as session:
        recorded = rowcount(session.execute(update(Corpus).where(_ours(claimed)).values(statistics=result))) == 1
    if not recorded:
        _forget_hashes_if_deleted(factory, store, corpus)
    return recorded


def _forget_hashes_if_deleted(factory: sessionmaker[Session], store: ObjectStore, corpus: Corpus) -> None:
    """Remove the hashes this attempt stored if the corpus is gone (deleted while they were computed); an
    attempt that took over writes the same object, so it stays while the corpus does."""
    with factory() as session:
        gone = session.scalar(select(Corpus.id).where(Corpus.id == corpus.id)) is None
    if gone:
        try:
            store.delete(hashes_key(corpus.team_id, corpus.id))
        except Exception:
            log.warning("the hashes of deleted corpus %s are left in the store", corpus.id, exc_info=True)


def _reason(exc: BaseException) -> str:
    if type(exc).__name__ in ("SoftTimeLimitExceeded", "TimeLimitExceeded"):
        return TIME_LIMIT
    return f"statistics failed: {str(exc) or type(exc).__name__}"


def _give_back(factory: sessionmaker[Session], claimed: Claimed) -> None:
    """Release the claim for the sweeper to send the task again (the database may be away: then
    the claim falls silent, and is taken over the same way)."""
    try:
        with transaction(factory) as session:
            session.execute(update(Corpus).where(_ours(claimed)).values(statistics_claimed_at=None))
    except Exception:
        log.warning("could not give back the statistics claim of corpus %s", claimed.row_id, exc_info=True)


def _end(factory: sessionmaker[Session], claimed: Claimed, message: str) -> None:
    """The statistics will not be computed: say why (the corpus itself stays usable)."""
    with transaction(factory) as session:
        session.execute(update(Corpus).where(_ours(claimed)).values(statistics_error=message[:4000]))


def _worker_died(factory: sessionmaker[Session], dead: Claimed) -> None:
    _end(factory, dead, WORKER_DIED.format(attempts=dead.attempt - 1))
