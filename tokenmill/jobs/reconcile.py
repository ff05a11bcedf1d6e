"""Reconciliation: the store holds what the rows account for, and nothing else.

A row and its objects cannot change in one transaction, so faults leave objects behind: a
corpus deleted while the store was away, a worker killed while writing a version's files,
an upload whose process died mid-stream. This pass, run periodically by the sweeper's beat,
removes them:
- `corpora/<team>/<corpus>`: kept while a corpus row names it; otherwise deleted once older
  than the grace period (an upload being registered has no row yet);
- `versions/<team>/<job>/<file>`: kept while its job is queued or running, or when the job
  made a version; otherwise deleted (failed, cancelled or deleted jobs); its spilled
  counts (`.../counts/...`, distributed counting) and measured parts (`.../measures/...`, an
  evaluation corpus measured whole) only while the job runs, as are its `count_parts` and
  `job_measure_parts` rows;
- `versions/<team>/<version>/<file>`: an imported version's (tokenmill.versions.importing),
  named by the version's own id: kept while the version exists; an id that names neither a
  job nor a version (an import being registered, a vanished job) is deleted once older than
  the grace period;
- `statistics/<team>/<corpus>.hashes` (a corpus's distinct document hashes,
  tokenmill.corpora.duplicates): kept while the corpus row exists; otherwise deleted once older
  than the grace period (the statistics of a corpus being deleted may still be writing it);
- `evaluations/<run>/<attempt>/...` (the recipe and the measured parts' sums of a corpus an
  evaluation run measures in parts, tokenmill.evaluation.parts): kept while the run is queued or
  running; otherwise deleted (a run with no row, once older than the grace period), as are its
  `measure_parts` rows;
- unfinished multipart uploads (S3) and partial writes (a local folder) older than the grace
  period are aborted.
Keys it does not recognise are left alone.
"""

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from itertools import islice

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.models import UNFINISHED, Corpus, EvaluationRun, TokenizerVersion, TrainingJob
from tokenmill.queued_work.parts import forget_finished
from tokenmill.store import ObjectStore, StoredObject

log = logging.getLogger(__name__)

BATCH = 500


def reconcile(factory: sessionmaker[Session], store: ObjectStore, grace_seconds: float) -> dict[str, int]:
    """Delete the objects no row accounts for and abort stale uploads; returns the counts."""
    cutoff = utcnow() - timedelta(seconds=grace_seconds)
    counts = {"corpus_objects": _corpus_objects(factory, store, cutoff),
              "version_objects": _version_objects(factory, store, cutoff),
              "hash_objects": _hash_objects(factory, store, cutoff),
              "evaluation_objects": _evaluation_objects(factory, store, cutoff)}
    with transaction(factory) as session:
        forget_finished(session)
    counts["aborted_uploads"] = store.abort_unfinished(cutoff)
    if any(counts.values()):
        log.info("reconciliation deleted %d corpus, %d version, %d hash and %d evaluation objects, aborted %d uploads",
                 *counts.values())
    return counts


def _corpus_objects(factory: sessionmaker[Session], store: ObjectStore, cutoff: datetime) -> int:
    def orphans(session: Session, batch: list[StoredObject]) -> list[StoredObject]:
        named = set(session.scalars(select(Corpus.storage_key).where(Corpus.storage_key.in_([o.key for o in batch]))))
        return [o for o in batch if o.key not in named and o.modified < cutoff]

    return _deleted(factory, store, "corpora/", orphans)


def _version_objects(factory: sessionmaker[Session], store: ObjectStore, cutoff: datetime) -> int:
    def orphans(session: Session, batch: list[StoredObject]) -> list[StoredObject]:
        jobs = {o: _job_of(o.key) for o in batch}
        working, made, known = _jobs_keeping_files(session, {job for job in jobs.values() if job is not None})
        return [o for o, job in jobs.items() if job is not None and not _kept(o.key, job, working, made)
                and (job in known or o.modified < cutoff)]

    return _deleted(factory, store, "versions/", orphans)


def _hash_objects(factory: sessionmaker[Session], store: ObjectStore, cutoff: datetime) -> int:
    def orphans(session: Session, batch: list[StoredObject]) -> list[StoredObject]:
        owners = {o: _corpus_of(o.key) for o in batch}
        alive = set(session.scalars(select(Corpus.id).where(Corpus.id.in_({c for c in owners.values() if c}))))
        return [o for o, corpus in owners.items() if corpus is not None and corpus not in alive and o.modified < cutoff]

    return _deleted(factory, store, "statistics/", orphans)


def _evaluation_objects(factory: sessionmaker[Session], store: ObjectStore, cutoff: datetime) -> int:
    def orphans(session: Session, batch: list[StoredObject]) -> list[StoredObject]:
        owners = {o: _run_of(o.key) for o in batch}
        statuses = dict(session.execute(select(EvaluationRun.id, EvaluationRun.status).where(
            EvaluationRun.id.in_({run for run in owners.values() if run is not None}))).all())
        return [o for o, run in owners.items() if run is not None and statuses.get(run) not in UNFINISHED
                and (run in statuses or o.modified < cutoff)]

    return _deleted(factory, store, "evaluations/", orphans)


def _deleted(factory: sessionmaker[Session], store: ObjectStore, prefix: str,
             orphans: Callable[[Session, list[StoredObject]], list[StoredObject]]) -> int:
    # The objects under `prefix` that `orphans` picks, a batch at a time, each batch judged in a
    # session of its own and deleted after it closes; returns how many.
    deleted = 0
    for batch in _batches(store.list_objects(prefix)):
        with factory() as session:
            doomed = orphans(session, batch)
        deleted += _delete(store, doomed)
    return deleted


def _jobs_keeping_files(session: Session, ids: set[uuid.UUID]
                        ) -> tuple[set[uuid.UUID], set[uuid.UUID | None], set[uuid.UUID]]:
    # (jobs still queued or running, jobs that made a version or imported versions, ids of known rows)
    if not ids:
        return set(), set(), set()
    jobs: dict[uuid.UUID, str] = dict(session.execute(
        select(TrainingJob.id, TrainingJob.status).where(TrainingJob.id.in_(ids))).all())
    working = {job for job, status in jobs.items() if status in UNFINISHED}
    made = set(session.scalars(select(TokenizerVersion.job_id).where(TokenizerVersion.job_id.in_(ids))))
    imported = set(session.scalars(select(TokenizerVersion.id).where(TokenizerVersion.id.in_(ids))))
    return working, made | imported, set(jobs) | imported


def _kept(key: str, job: uuid.UUID, working: set[uuid.UUID], made: set[uuid.UUID | None]) -> bool:
    # A job's spilled counts and measured parts (versions/<team>/<job>/counts/..., .../measures/...)
    # are needed only while it runs.
    if key.split("/")[3:4] in (["counts"], ["measures"]):
        return job in working
    return job in working or job in made


def _job_of(key: str) -> uuid.UUID | None:
    # versions/<team>/<job>/<file>
    parts = key.split("/")
    try:
        return uuid.UUID(parts[2]) if len(parts) >= 4 else None
    except ValueError:
        return None


def _corpus_of(key: str) -> uuid.UUID | None:
    # statistics/<team>/<corpus>.hashes
    parts = key.split("/")
    try:
        return uuid.UUID(parts[2].removesuffix(".hashes")) if len(parts) == 3 and parts[2].endswith(".hashes") else None
    except ValueError:
        return None


def _run_of(key: str) -> uuid.UUID | None:
    # evaluations/<run>/<attempt>/...
    parts = key.split("/")
    try:
        return uuid.UUID(parts[1]) if len(parts) >= 3 else None
    except ValueError:
        return None


def _delete(store: ObjectStore, objects: list[StoredObject]) -> int:
    for stored in objects:
        store.delete(stored.key)
    return len(objects)


def _batches(objects: Iterable[StoredObject]) -> Iterator[list[StoredObject]]:
    iterator = iter(objects)
    while batch := list(islice(iterator, BATCH)):
        yield batch
