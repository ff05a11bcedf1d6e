"""The training job, worker side: claim, stream, train, export, evaluate, register.

Failure modes and what they leave:
- a duplicate delivery finds the job no longer 'queued' and does nothing;
- a cancel (or the sweeper failing the job) is noticed at the next progress report;
- a transient fault (database, store) puts the job back to 'queued' for a retry;
- anything else fails the job with a message a person can act on.
In every case the files written so far are deleted: a version exists only with all its files.
"""

import logging
import platform
import time
import uuid
from importlib.metadata import version as package_version
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.errors import TokenmillError
from tokenmill.evaluation import evaluate_references, evaluate_version, evaluation_row
from tokenmill.jobs import existing_corpora
from tokenmill.models import Corpus, TokenizerVersion, TrainingJob
from tokenmill.progress import JobCancelled, PeakMemory, Reporter
from tokenmill.spec import TrainingSpec
from tokenmill.store import TRANSIENT_ERRORS, ObjectStore
from tokenmill.trainer import TrainedFiles, train_files
from tokenmill.training import determinism
from tokenmill.versions import next_version_number

log = logging.getLogger(__name__)

LIBRARIES = ("tokenizers", "sentencepiece", "tiktoken", "transformers")


class TransientError(Exception):
    """A fault worth retrying (database or store unavailable); the job is queued again."""


def claim_job(factory: sessionmaker[Session], job_id: uuid.UUID) -> bool:
    """queued → running, atomically; False when another delivery or a cancel got there first."""
    with transaction(factory) as session:
        result = session.execute(
            update(TrainingJob)
            .where(TrainingJob.id == job_id, TrainingJob.status == "queued")
            .values(status="running", stage="starting", progress=0.0, attempts=TrainingJob.attempts + 1,
                    started_at=utcnow(), updated_at=utcnow(), error=None)
        )
    return result.rowcount == 1


def job_prefix(job: TrainingJob) -> str:
    """Where a job writes its files: derived from the job, so a retry overwrites, never duplicates."""
    return f"versions/{job.team_id}/{job.id}"


def lineage(spec: TrainingSpec, corpora: list[Corpus], job_id: uuid.UUID) -> dict[str, Any]:
    """What a version was made from: corpora by sha256, library versions, seed."""
    return {
        "job_id": str(job_id),
        "corpora": [
            {"id": str(c.id), "name": c.name, "domain": c.domain, "language": c.language,
             "sha256": c.sha256, "bytes": c.bytes, "lines": c.lines}
            for c in corpora
        ],
        "libraries": {name: package_version(name) for name in (*LIBRARIES, "tokenmill")},
        "python": platform.python_version(),
        "seed": spec.seed,
        "determinism": determinism(spec),
    }


def run_training_job(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, max_attempts: int = 3) -> str:
    """Run one training job to its end; returns the job's final status (or 'skipped')."""
    if not claim_job(factory, job_id):
        return "skipped"
    with factory() as session:
        job = session.get_one(TrainingJob, job_id)
    corpora = _corpora(factory, job.train_corpus_ids)
    prefix = job_prefix(job)
    report = Reporter(factory, job_id)
    try:
        if len(corpora) != len(job.train_corpus_ids):
            raise TokenmillError("a training corpus was deleted after the job was submitted")
        spec = TrainingSpec.model_validate(job.spec)
        info = lineage(spec, corpora, job_id)
        started = time.monotonic()
        with PeakMemory() as memory:
            trained = train_files(spec, store, corpora, report, info)
        seconds = time.monotonic() - started
        for name, data in trained.files.items():
            store.put_bytes(f"{prefix}/{name}", data)
        report("evaluating", 0.85, force=True)
        targets = _corpora(factory, job.eval_corpus_ids)
        results = evaluate_version(store, job.tokenizer, trained.files, targets,
                                   lambda done: report("evaluating", 0.85 + 0.1 * done))
        report("evaluating references", 0.93, force=True)
        _reference_baselines(factory, store, job.team_id, targets)
        report("registering", 0.95, force=True)
        number = _register(factory, job, spec, trained, info, prefix, seconds, memory.peak, results)
        log.info("job %s produced %s v%s", job_id, job.tokenizer, number)
    except JobCancelled:
        store.delete_prefix(prefix)
        return "cancelled"
    except (OperationalError, *TRANSIENT_ERRORS) as exc:
        store.delete_prefix(prefix)
        if job.attempts >= max_attempts:
            _fail(factory, job_id, f"gave up after {job.attempts} attempts: {exc}")
            return "failed"
        _requeue(factory, job_id, exc)
        raise TransientError(str(exc)) from exc
    except Exception as exc:
        store.delete_prefix(prefix)
        _fail(factory, job_id, describe(exc))
        return "failed"
    return "succeeded"


def _corpora(factory: sessionmaker[Session], ids: list[str]) -> list[Corpus]:
    with factory() as session:
        return existing_corpora(session, ids)


def _reference_baselines(factory: sessionmaker[Session], store: ObjectStore, team_id: uuid.UUID, corpora: list[Corpus]) -> None:
    # GPT-2, cl100k and o200k on the same corpora, once per corpus; a failure here costs the
    # dashboard its baselines for a while, never the version.
    try:
        evaluate_references(factory, store, team_id, corpora)
    except Exception:
        log.exception("reference evaluations failed for team %s", team_id)


def describe(exc: BaseException) -> str:
    """An error message a person can act on."""
    if isinstance(exc, TokenmillError):
        return exc.detail
    text = str(exc) or type(exc).__name__
    if type(exc).__name__ in ("SoftTimeLimitExceeded", "TimeLimitExceeded"):
        return TIME_LIMIT
    return f"training failed: {text}"


def _register(factory, job, spec, trained: TrainedFiles, info, prefix, seconds, peak, results) -> int:
    # One transaction: the version, its evaluations and the job's success, or none of them.
    for _ in range(5):
        try:
            with transaction(factory) as session:
                current = session.scalar(select(TrainingJob).where(TrainingJob.id == job.id).with_for_update())
                if current is None or current.status != "running":
                    raise JobCancelled(str(job.id))
                number = next_version_number(session, job.team_id, job.tokenizer)
                files = [{"name": name, "bytes": len(data), "sha256": trained.hashes[name], "key": f"{prefix}/{name}"}
                         for name, data in sorted(trained.files.items())]
                version = TokenizerVersion(
                    team_id=job.team_id, name=job.tokenizer, version=number, job_id=job.id,
                    spec=spec.model_dump(), vocab_size=trained.vocab_size, files=files, lineage=info,
                    train_seconds=round(seconds, 3), peak_memory_bytes=peak,
                )
                session.add(version)
                session.flush()
                alive = set(session.scalars(select(Corpus.id).where(Corpus.id.in_([c.id for c, _ in results]))))
                session.add_all(evaluation_row(job.team_id, corpus, metrics, version_id=version.id)
                                for corpus, metrics in results if corpus.id in alive)
                current.status, current.stage, current.progress = "succeeded", "done", 1.0
                current.version, current.finished_at, current.updated_at = number, utcnow(), utcnow()
            return number
        except IntegrityError:
            continue  # another job of the same name took this number first
    raise TokenmillError("could not allocate a version number; try again")


def abandon_job(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, message: str) -> None:
    """Fail a job whose worker was killed (hard time limit): its row and its partial files."""
    with factory() as session:
        job = session.get(TrainingJob, job_id)
    if job is None:
        return
    _fail(factory, job_id, message)
    store.delete_prefix(job_prefix(job))


TIME_LIMIT = "the job ran past its time limit (a slow custom pre_tokenizer_regex or a very large corpus?)"


def _fail(factory: sessionmaker[Session], job_id: uuid.UUID, message: str) -> None:
    with transaction(factory) as session:
        session.execute(
            update(TrainingJob)
            .where(TrainingJob.id == job_id, TrainingJob.status == "running")
            .values(status="failed", stage="failed", error=message[:4000], finished_at=utcnow(), updated_at=utcnow())
        )


def _requeue(factory: sessionmaker[Session], job_id: uuid.UUID, exc: BaseException) -> None:
    with transaction(factory) as session:
        session.execute(
            update(TrainingJob)
            .where(TrainingJob.id == job_id, TrainingJob.status == "running")
            .values(status="queued", stage="retrying", error=f"transient: {exc}"[:4000], updated_at=utcnow())
        )
