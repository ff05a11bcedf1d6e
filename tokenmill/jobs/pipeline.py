"""The training job, worker side: claim, stream, train, export, evaluate, register.

A task message starts the fair next job (tokenmill.queued_work.scheduling), or takes over its own job
if that one has fallen silent; `run_training_job` runs one given job.

Failure modes and what they leave (lifecycle.py has the claim, the heartbeat and the states):
- a duplicate delivery finds nothing fair to start, or starts the next job in turn;
- a killed worker (kill -9, out of memory, lost machine) leaves a silent row: the task's
  redelivery or the sweeper takes it over once it has been silent for `sweep_silent_after`;
- a cancel (or the sweeper failing the job) is noticed at the next progress report, or by
  the heartbeat, which ends the worker process a few seconds later if the job goes on;
- a transient fault (database, store) puts the job back to 'queued' for a retry, until its
  attempts are used up; if the database itself is away, the row falls silent instead;
- anything else, a library's panic included, fails the job with a message a person can act on.
In every case the files written so far are deleted (or, with the store away, left to the
sweeper's reconciliation): a version exists only with all its files.
"""

import logging
import platform
import time
import uuid
from collections.abc import Iterable
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.rows import existing_corpora
from tokenmill.db import transaction, utcnow
from tokenmill.errors import JobCancelled, TokenmillError
from tokenmill.models import Corpus, Status, TokenizerVersion, TrainingJob
from tokenmill.queued_work.lifecycle import Claim, claim, claim_in_turn, fail, latest_claim, run_claimed
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.progress import PeakMemory, Reporter
from tokenmill.queued_work.scheduling import TRAINING, Wake, wake_team_of
from tokenmill.store import ObjectStore, delete_now_or_later
from tokenmill.training.counting.distributed import Counting, Helpers
from tokenmill.training.mixtures import Drawn
from tokenmill.training.spec import TrainingSpec
from tokenmill.training.version_files import TrainedFiles, train_version_files, training_texts
from tokenmill.training.with_tokenizers import determinism
from tokenmill.versions.registry import next_version_number

if TYPE_CHECKING:  # the evaluation engine is imported only when a job evaluates
    from tokenmill.evaluation.parts import MeasureHelpers, Spread

log = logging.getLogger(__name__)

# The libraries that make a version's files, recorded as installed.
LIBRARIES = ("tokenizers", "sentencepiece", "rustbpe", "tiktoken", "regex", "numba")
# The library the files are proven to load in (tests/e2e, tests/unit/test_lineage.py), which
# the service never imports: recorded as pinned in pyproject.toml's dev extras.
LOADS_WITH = {"transformers": "5.23.0"}
Results = list[tuple[Corpus, dict[str, Any]]]  # a version's metrics on each evaluation corpus


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
        "libraries": {**{name: package_version(name) for name in (*LIBRARIES, "tokenmill")}, **LOADS_WITH},
        "python": platform.python_version(),
        "seed": spec.seed,
        "determinism": determinism(spec),
    }


def run_next_job(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, limits: WorkLimits,
                 helpers: Helpers | None = None, claimant: str | None = None, wake: Wake | None = None,
                 measuring: "MeasureHelpers | None" = None) -> str:
    """What a task message for `job_id` does: take that job over if it fell silent, else start the
    fair next job of any team; returns the status of the job it ran, or "idle". When the job
    ends and its team has queued jobs, `wake` sends a message for the oldest of them."""
    started = claim_in_turn(factory, TRAINING, job_id, limits, claimant)
    if started is None:
        return "idle"
    status = _run(factory, store, started, limits, helpers, measuring)
    if wake is not None:
        wake_team_of(factory, TRAINING, started, wake)
    return status


def run_training_job(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID,
                     limits: WorkLimits = WorkLimits(), helpers: Helpers | None = None,
                     measuring: "MeasureHelpers | None" = None) -> str:
    """Run this training job to its end, whatever the turn; returns the job's final status (or
    why it did not run). `helpers` sends the counting tasks of a `counting: distributed` job
    (without it, this worker counts every part itself); `measuring`, the measuring tasks of an
    evaluation corpus measured whole (without it, this worker measures it all)."""
    outcome = claim(factory, TrainingJob, job_id, limits)
    if outcome is not Claim.CLAIMED:
        return str(outcome.value)  # str() for mypy, which types the value of two members as Any
    return _run(factory, store, job_id, limits, helpers, measuring)


def _run(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, limits: WorkLimits,
         helpers: Helpers | None, measuring: "MeasureHelpers | None") -> str:
    # A claimed job, to its end.
    with factory() as session:
        job = session.get_one(TrainingJob, job_id)
    prefix = job_prefix(job)

    def work() -> str:
        _train_and_register(factory, store, job, prefix, limits, helpers or Helpers(), measuring)
        return Status.SUCCEEDED

    return run_claimed(factory, TrainingJob, job_id, job.attempts, limits, work, lambda: discard(store, prefix),
                       "training")


def _train_and_register(factory: sessionmaker[Session], store: ObjectStore, job: TrainingJob, prefix: str,
                        limits: WorkLimits, helpers: Helpers, measuring: "MeasureHelpers | None") -> None:
    corpora = _corpora(factory, job.train_corpus_ids)
    if len(corpora) != len(job.train_corpus_ids):
        raise TokenmillError("a training corpus was deleted after the job was submitted")
    report = Reporter(factory, job.id, job.attempts)
    spec = TrainingSpec.model_validate(job.spec)
    info = lineage(spec, corpora, job.id)
    started = time.monotonic()
    counting = Counting(factory, job.id, job.attempts, prefix, limits, helpers)
    with PeakMemory() as memory:
        if spec.base is not None:  # new merges (or pieces) after a base's, its ids untouched
            texts = training_texts(store, corpora, drawn=Drawn.of(spec, corpora, info))
            trained = _extended(factory, store, job, spec, texts, report, info)
        elif spec.superword is not None:  # SuperBPE: a second stage of merges across whitespace
            from tokenmill.jobs.extension import superword_files
            from tokenmill.training.counting.merge import learner_budget

            trained = superword_files(spec, store, corpora, report, info, limits.regex_seconds,
                                      learner_budget(limits.max_memory), counting)
        else:
            trained = train_version_files(spec, store, corpora, report, info, counting,
                                          regex_seconds=limits.regex_seconds)
    seconds = time.monotonic() - started
    for name, data in trained.files.items():
        store.put_bytes(f"{prefix}/{name}", data)
    results = _evaluate(factory, store, job, trained, report, Measuring(prefix, limits, measuring))
    report("registering", 0.95, force=True)
    number = _register(factory, job, spec, trained, info, prefix, seconds, memory.peak, results)
    log.info("job %s produced %s v%s", job.id, job.tokenizer, number)


def _extended(factory: sessionmaker[Session], store: ObjectStore, job: TrainingJob, spec: TrainingSpec,
              texts: Iterable[str], report: Reporter, info: dict[str, Any]) -> TrainedFiles:
    # A sentencepiece base gets pieces appended; a byte-level BPE one, merges learned after its own.
    assert spec.base is not None
    if spec.library == "sentencepiece":
        from tokenmill.jobs.sentencepiece_extension import load_model, sentencepiece_extension_files

        return sentencepiece_extension_files(spec, load_model(factory, store, job.team_id, spec.base), texts,
                                             report, info)
    from tokenmill.jobs.extension import extension_files, load_base  # its learner is numba's: only here

    return extension_files(spec, load_base(factory, store, job.team_id, spec.base), texts, report, info)


def discard(store: ObjectStore, prefix: str) -> None:
    """Delete what a job wrote; if the store is away, the sweeper's reconciliation does it later."""
    delete_now_or_later(store.delete_prefix, prefix)


def _corpora(factory: sessionmaker[Session], ids: list[str]) -> list[Corpus]:
    with factory() as session:
        return existing_corpora(session, ids)


class Measuring(NamedTuple):
    """What the job's evaluation needs to spread a corpus measured whole over workers."""

    prefix: str  # the job's
    limits: WorkLimits
    helpers: "MeasureHelpers | None"


def _evaluate(factory: sessionmaker[Session], store: ObjectStore, job: TrainingJob, trained: TrainedFiles,
              report: Reporter, measuring: Measuring) -> Results:
    """The new version's metrics on each evaluation corpus, the references' made where missing."""
    targets = _corpora(factory, job.eval_corpus_ids)
    if not targets:
        return []  # nothing to measure: the evaluation kernels (numba, ~75 MiB) are never imported
    from tokenmill.evaluation.measuring import evaluate_version
    from tokenmill.evaluation.parts import Spread, job_owner

    spread = None if measuring.helpers is None else Spread(
        factory, job_owner(job.id, job.attempts, measuring.prefix), measuring.limits, measuring.helpers)
    report("evaluating", 0.85, force=True)
    results = evaluate_version(store, job.tokenizer, trained.files, targets,
                               lambda done: report("evaluating", 0.85 + 0.08 * done), spread=spread)
    report("evaluating references", 0.93, force=True)
    _reference_baselines(factory, store, job.team_id, targets, spread)
    return results


def _reference_baselines(factory: sessionmaker[Session], store: ObjectStore, team_id: uuid.UUID, corpora: list[Corpus],
                         spread: "Spread | None") -> None:
    # GPT-2, cl100k and o200k on the same corpora, once per corpus; a failure here costs the
    # dashboard its baselines for a while, never the version.
    from tokenmill.evaluation.measuring import evaluate_references

    try:
        evaluate_references(factory, store, team_id, corpora, spread=spread)
    except Exception:
        log.exception("reference evaluations failed for team %s", team_id)


def _register(factory: sessionmaker[Session], job: TrainingJob, spec: TrainingSpec, trained: TrainedFiles,
              info: dict[str, Any], prefix: str, seconds: float, peak: int, results: Results) -> int:
    # One transaction: the version, its evaluations and the job's success, or none of them.
    for _ in range(5):
        try:
            with transaction(factory) as session:
                current = session.scalar(select(TrainingJob).where(TrainingJob.id == job.id).with_for_update())
                if current is None or current.status != Status.RUNNING or current.attempts != job.attempts:
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
                if results:
                    _add_evaluations(session, job.team_id, version, results)
                current.status, current.stage, current.progress = Status.SUCCEEDED, "done", 1.0
                current.version, current.finished_at, current.updated_at = number, utcnow(), utcnow()
            return number
        except IntegrityError:
            continue  # another job of the same name took this number first
    raise TokenmillError("could not allocate a version number; try again")


def _add_evaluations(session: Session, team_id: uuid.UUID, version: TokenizerVersion, results: Results) -> None:
    from tokenmill.evaluation.measuring import evaluation_row

    alive = set(session.scalars(select(Corpus.id).where(Corpus.id.in_([c.id for c, _ in results]))))
    session.add_all(evaluation_row(team_id, corpus, metrics, version_id=version.id)
                    for corpus, metrics in results if corpus.id in alive)  # a corpus deleted meanwhile is left out


def abandon_job(factory: sessionmaker[Session], store: ObjectStore, claimant: str, message: str) -> None:
    """Fail the job a killed worker process was running (hard time limit), found by the task
    that claimed it: its row and its partial files."""
    job_id = latest_claim(factory, TrainingJob, claimant)
    if job_id is None:
        return
    with factory() as session:
        job = session.get_one(TrainingJob, job_id)
    fail(factory, TrainingJob, job_id, message, job.attempts)
    discard(store, job_prefix(job))
