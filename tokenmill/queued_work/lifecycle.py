"""The life of queued work (a training job or an evaluation run) on the worker side.

A row is the truth; a task only carries an id. A worker *claims* a row (queued → running, or
running but silent for `silent_after` seconds, whose worker is taken for dead: claims.py),
keeps it alive with a *heartbeat* while it works (heartbeat.py), and ends it as succeeded,
failed, cancelled, or queued again for a retry. A row whose attempts are used up is failed at
its next claim, never run again. Once the claim is no longer its own (cancelled, failed, or
taken over), the work stops within seconds: it notices at its next progress report, or else
the heartbeat ends the worker process.

Deliberately not here: what the work is (pipeline.py, evaluation/submission.py), which queued row a
worker starts (scheduling.py) and the periodic pass that finds silent rows when no delivery
comes (sweeper.py).
"""

import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from enum import Enum

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import DATABASE_AWAY, POOL_BUSY, rowcount, transaction, utcnow
from tokenmill.errors import JobCancelled, TokenmillError, TransientError
from tokenmill.models import EvaluationRun, Status, TrainingJob
from tokenmill.queued_work import scheduling
from tokenmill.queued_work.claims import JOBS, RUNS, Claimed, Claims, claim_by_id, in_attempt
from tokenmill.queued_work.heartbeat import Heartbeat
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.scheduling import WorkQueue
from tokenmill.store import TRANSIENT_ERRORS

log = logging.getLogger(__name__)

Work = type[TrainingJob] | type[EvaluationRun]

WORKER_DIED = ("its worker died {attempts} times (killed, out of memory, or its machine lost); "
               "try a smaller corpus (max_sentences) or submit it again")


# Faults worth a retry: the database away or its pool busy, the store away; not the work wrong.
TRANSIENT: tuple[type[BaseException], ...] = (*DATABASE_AWAY, *POOL_BUSY, *TRANSIENT_ERRORS)


def unavailable(exc: BaseException) -> str:
    """What a person is told of a transient fault: which service, never its address."""
    what = "the database" if isinstance(exc, (*DATABASE_AWAY, *POOL_BUSY)) else "the object store"
    return f"{what} was unreachable ({type(exc).__name__})"


def describe(exc: BaseException, work: str = "training") -> str:
    """An error message a person can act on."""
    if isinstance(exc, TokenmillError):
        return exc.detail
    text = str(exc) or type(exc).__name__
    if type(exc).__name__ in ("SoftTimeLimitExceeded", "TimeLimitExceeded"):
        return TIME_LIMIT
    return f"{work} failed: {text}"


TIME_LIMIT = "the job ran past its time limit (a slow custom pre_tokenizer_regex or a very large corpus?)"


class Claim(str, Enum):
    CLAIMED = "claimed"
    SKIPPED = "skipped"  # another worker has it, or it has ended
    EXHAUSTED = "exhausted"  # its attempts were used up: it has been failed


def claims_of(model: Work) -> Claims:
    """Where a training job or an evaluation run keeps its claim."""
    return JOBS if model is TrainingJob else RUNS


def running_in(model: Work, row_id: uuid.UUID, attempt: int | None = None) -> ColumnElement[bool]:
    """The row, while it runs (in the given attempt: a worker taken for dead that wakes up
    again must not write over the attempt that took its place)."""
    return in_attempt(claims_of(model), model.id == row_id, attempt)


def stage_of(model: Work, stage: str) -> dict[str, str]:
    """The stage column's value, for the models that have one (a training job's), as update values."""
    return {"stage": stage} if model is TrainingJob else {}


def claim(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, limits: WorkLimits,
          claimant: str | None = None) -> Claim:
    """queued → running (or a silent running row taken over), counting the attempt, whatever the
    turn; past its attempts the row is failed instead."""
    exhausted: list[Claimed] = []

    def worker_died(dead: Claimed) -> None:
        exhausted.append(dead)
        _worker_died(factory, model, dead)

    if claim_by_id(factory, claims_of(model), row_id, limits.max_attempts, limits.silent_after, claimant,
                   worker_died) is not None:
        return Claim.CLAIMED
    return Claim.EXHAUSTED if exhausted else Claim.SKIPPED


def claim_in_turn(factory: sessionmaker[Session], queue: WorkQueue, row_id: uuid.UUID, limits: WorkLimits,
                  claimant: str | None = None) -> uuid.UUID | None:
    """scheduling.claim_in_turn for jobs and runs: a row past its attempts is failed."""
    model: Work = queue.model
    claimed = scheduling.claim_in_turn(factory, queue, row_id, limits, claimant,
                                       lambda dead: _worker_died(factory, model, dead))
    return None if claimed is None else claimed.row_id


def _worker_died(factory: sessionmaker[Session], model: Work, dead: Claimed) -> None:
    fail(factory, model, dead.row_id, WORKER_DIED.format(attempts=dead.attempt - 1))


def latest_claim(factory: sessionmaker[Session], model: Work, claimant: str) -> uuid.UUID | None:
    """The running row this claimant (a task id) claimed last, if any."""
    with factory() as session:
        return session.scalar(select(model.id).where(model.claimed_by == claimant, model.status == Status.RUNNING)
                              .order_by(model.started_at.desc()).limit(1))


def taken_over(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, attempt: int) -> bool:
    """Whether another attempt has the row (queued again, or running in a later attempt): what
    this attempt wrote is then the next one's to overwrite, not this one's to delete."""
    with factory() as session:
        row = session.execute(select(model.status, model.attempts).where(model.id == row_id)).first()
    return row is not None and (row.status == Status.QUEUED or (row.status == Status.RUNNING and row.attempts != attempt))


def fail(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, message: str,
         attempt: int | None = None) -> bool:
    """running → failed with a message a person can act on; False if it was not running."""
    now = utcnow()
    with transaction(factory) as session:
        return rowcount(session.execute(
            update(model).where(running_in(model, row_id, attempt))
            .values(status=Status.FAILED, error=message[:4000], finished_at=now, updated_at=now, **stage_of(model, "failed"))
        )) == 1


def requeue(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, reason: str, attempt: int,
            retry_in: float = 0.0) -> bool:
    """running → queued for another attempt, due in `retry_in` seconds; False if it was not
    running (or the database is away)."""
    now = utcnow()
    try:
        with transaction(factory) as session:
            return rowcount(session.execute(
                update(model).where(running_in(model, row_id, attempt))
                .values(status=Status.QUEUED, error=reason[:4000], updated_at=now,
                        retry_at=now + timedelta(seconds=retry_in), **stage_of(model, "retrying"))
            )) == 1
    except Exception:
        # The database itself may be the fault: the row stays running, falls silent, and the
        # next claim or sweep takes it over.
        log.warning("could not queue %s %s again", model.__tablename__, row_id, exc_info=True)
        return False


def run_claimed(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, attempt: int, limits: WorkLimits,
                work: Callable[[], str], discard: Callable[[], None], what: str) -> str:
    """Run claimed work under its heartbeat and end its row whatever happens; returns its status.

    A cancel ends it 'cancelled'; a transient fault queues it again, due after a pause that grows
    with its attempts (TransientError, for the task to retry then), until they are used up; anything else, a library's panic included
    (pyo3's PanicException is a BaseException), fails it. `discard` removes what it wrote
    (once the claim is gone, only if no other attempt owns the row). Only the process being
    told to stop goes on up.
    """
    def discard_unless_taken_over() -> None:
        try:
            ours = not taken_over(factory, model, row_id, attempt)
        except Exception:  # the database is away: reconciliation removes a cancelled or failed job's files
            log.warning("could not read %s %s; leaving its files to reconciliation", model.__tablename__, row_id)
            return
        if ours:
            discard()

    with Heartbeat.of_claim(factory, claims_of(model), model.id == row_id, attempt, limits,
                            lambda message: fail(factory, model, row_id, message, attempt), discard_unless_taken_over):
        try:
            return work()
        except JobCancelled:
            discard_unless_taken_over()
            return Status.CANCELLED
        except TRANSIENT as exc:
            discard()
            if attempt >= limits.max_attempts:
                fail(factory, model, row_id, f"gave up after {attempt} attempts: {unavailable(exc)}", attempt)
                return Status.FAILED
            retry_in = limits.retry_seconds * attempt
            requeue(factory, model, row_id, f"retrying: {unavailable(exc)}", attempt, retry_in)
            raise TransientError(unavailable(exc), retry_in) from exc
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            log.exception("%s %s failed", what, row_id)
            discard()
            fail(factory, model, row_id, describe(exc, what), attempt)
            return Status.FAILED
