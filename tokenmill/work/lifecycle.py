"""The life of queued work (a training job or an evaluation run) on the worker side.

A row is the truth; a task only carries an id. A worker *claims* a row with one
conditional update (queued → running, or running but silent for `silent_after` seconds,
whose worker is taken for dead), keeps it alive with a *heartbeat* while it works, and
ends it as succeeded, failed, cancelled, or queued again for a retry. A row whose attempts
are used up is failed at its next claim, never run again. Once the claim is no longer its
own (cancelled, failed, or taken over), the work stops within seconds: it notices at its
next progress report, or else the heartbeat ends the worker process.

Deliberately not here: what the work is (pipeline.py, evaluation/submission.py), which queued row a
worker starts (scheduling.py) and the periodic pass that finds silent rows when no delivery
comes (sweeper.py).
"""

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

import psutil
from sqlalchemy import ColumnElement, or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import DATABASE_AWAY, POOL_BUSY, rowcount, transaction, utcnow
from tokenmill.errors import JobCancelled, TokenmillError, TransientError
from tokenmill.models import EvaluationRun, Status, TrainingJob
from tokenmill.settings import Settings
from tokenmill.store import TRANSIENT_ERRORS

log = logging.getLogger(__name__)

Work = type[TrainingJob] | type[EvaluationRun]

WORKER_DIED = ("its worker died {attempts} times (killed, out of memory, or its machine lost); "
               "try a smaller corpus (max_sentences) or submit it again")


# A worker process ended by its heartbeat exits with these codes (sysexits.h: EX_SOFTWARE, EX_TEMPFAIL).
EXIT_OVER_MEMORY = 70
EXIT_STOPPED = 75


@dataclass(frozen=True)
class WorkLimits:
    """How a worker runs queued work: attempts, when silence means death, memory, how many at
    once per team (the running_jobs default, tokenmill.quotas), how long lost work may go on."""

    max_attempts: int = 3
    silent_after: float = 120.0
    heartbeat_seconds: float = 10.0
    max_memory: int | None = None
    running_jobs: int = 2
    # Once its claim is gone, how long work has to notice (at a progress report) before its
    # process is ended; the claim itself is read every second.
    stop_grace: float = 3.0
    # Longest one training document may keep a custom pre_tokenizer_regex busy (tokenmill.training.regex_limit).
    regex_seconds: float = 10.0

    @classmethod
    def of(cls, settings: Settings) -> "WorkLimits":
        return cls(max_attempts=settings.job_max_attempts, silent_after=settings.sweep_silent_after,
                   heartbeat_seconds=settings.heartbeat_seconds, max_memory=settings.job_max_memory_bytes,
                   regex_seconds=settings.regex_document_seconds,
                   running_jobs=settings.quota_running_jobs)


RETRY_SECONDS = 10.0  # a row queued again after a transient fault waits this long times its attempts


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


def held(model: Work, row_id: uuid.UUID, attempt: int | None = None) -> ColumnElement[bool]:
    """The row, while it runs (in the given attempt: a worker taken for dead that wakes up
    again must not write over the attempt that took its place)."""
    condition = (model.id == row_id) & (model.status == Status.RUNNING)
    return condition if attempt is None else condition & (model.attempts == attempt)


def stage_of(model: Work, stage: str) -> dict[str, str]:
    """The stage column's value, for the models that have one (a training job's), as update values."""
    return {"stage": stage} if model is TrainingJob else {}


def claimed_values(model: Work, now: datetime, claimant: str | None) -> dict[str, Any]:
    """What a claim writes: running, one attempt more, by this claimant (a task id)."""
    return {"status": Status.RUNNING, "attempts": model.attempts + 1, "started_at": now, "updated_at": now,
            "error": None, "claimed_by": claimant, "retry_at": None, **stage_of(model, "starting"),
            **({"progress": 0.0} if model is TrainingJob else {})}


def claim(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, limits: WorkLimits,
          claimant: str | None = None) -> Claim:
    """queued → running (or a silent running row taken over), counting the attempt."""
    return _claim_if(factory, model, row_id, limits, claimant, silent_only=False)


def take_over(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, limits: WorkLimits,
              claimant: str | None = None) -> Claim:
    """A silent running row taken over (its worker is taken for dead), counting the attempt;
    a queued row is left to the fair pick (scheduling.py)."""
    return _claim_if(factory, model, row_id, limits, claimant, silent_only=True)


def _claim_if(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, limits: WorkLimits,
              claimant: str | None, silent_only: bool) -> Claim:
    now = utcnow()
    silent = (model.status == Status.RUNNING) & (model.updated_at < now - timedelta(seconds=limits.silent_after))
    with transaction(factory) as session:
        attempts = session.execute(
            update(model).where(model.id == row_id, silent if silent_only else or_(model.status == Status.QUEUED, silent))
            .values(**claimed_values(model, now, claimant)).returning(model.attempts)
        ).scalar()
    if attempts is None:
        return Claim.SKIPPED
    if attempts > limits.max_attempts:
        fail(factory, model, row_id, WORKER_DIED.format(attempts=attempts - 1))
        return Claim.EXHAUSTED
    return Claim.CLAIMED


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
            update(model).where(held(model, row_id, attempt))
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
                update(model).where(held(model, row_id, attempt))
                .values(status=Status.QUEUED, error=reason[:4000], updated_at=now,
                        retry_at=now + timedelta(seconds=retry_in), **stage_of(model, "retrying"))
            )) == 1
    except Exception:
        # The database itself may be the fault: the row stays running, falls silent, and the
        # next claim or sweep takes it over.
        log.warning("could not queue %s %s again", model.__tablename__, row_id, exc_info=True)
        return False


JOB_MEMORY_ADVICE = "train on fewer documents (max_sentences) or ask for a smaller vocabulary"


class Heartbeat:
    """Touches a claim every `heartbeat_seconds`, guards this process's memory, and ends work
    whose claim is gone.

    A thread, so that it beats while a library trains or encodes in native code (both release
    the GIL while they work). `touch` writes the beat and says whether the claim is still
    ours; `held`, a cheap read, says so every second between beats (a claim that ended by our
    own hand, a success, still counts as held). When the claim is gone (cancelled, failed or
    taken over), the work has `stop_grace` seconds to notice at a progress report; then `stop`
    is called (it removes what the work wrote, unless another attempt owns it) and the process
    ends with its children: a native trainer or a backtracking regex never reports, and would
    hold a worker slot for hours. Likewise when the process and its children hold more than
    `max_memory` bytes: `give_up` is told why and the process ends at once, before the kernel's
    OOM killer picks a process of its own choosing. Either way Celery replaces the process and
    redelivers its task, which finds the row ended and starts the next one.
    """

    def __init__(self, factory: sessionmaker[Session], touch: Callable[[Session], bool], limits: WorkLimits,
                 give_up: Callable[[str], object] | None = None, check_memory_every: float = 1.0,
                 held: Callable[[Session], bool] | None = None, stop: Callable[[], object] | None = None,
                 memory_advice: str = JOB_MEMORY_ADVICE) -> None:
        self.factory, self.touch, self.give_up, self.held, self.stop = factory, touch, give_up, held, stop
        self.memory_advice = memory_advice
        self.every, self.check_every, self.grace = limits.heartbeat_seconds, check_memory_every, limits.stop_grace
        self.max_memory = limits.max_memory if give_up is not None else None
        self.lost = False  # the claim is no longer ours (cancelled, failed or taken over)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="heartbeat")

    @classmethod
    def of_work(cls, factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, attempt: int,
                limits: WorkLimits, stop: Callable[[], object] | None = None) -> "Heartbeat":
        """The heartbeat of a running training job or evaluation run, in its attempt."""
        def touch(session: Session) -> bool:
            touched = session.execute(update(model).where(held(model, row_id, attempt)).values(updated_at=utcnow()))
            return rowcount(touched) == 1

        def ours(session: Session) -> bool:
            status = session.scalar(select(model.status).where(model.id == row_id, model.attempts == attempt))
            return status in (Status.RUNNING, Status.SUCCEEDED)

        return cls(factory, touch, limits, lambda message: fail(factory, model, row_id, message, attempt),
                   held=ours, stop=stop)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        process = psutil.Process()
        fast = bool(self.max_memory) or self.held is not None
        tick = min(self.every, self.check_every) if fast else self.every
        last_beat = time.monotonic()
        lost_since: float | None = None
        while not self._stop.wait(tick):
            if self.max_memory and self.give_up is not None and over_memory(process, self.max_memory):
                self._out_of_memory(self.max_memory, self.give_up)
            if time.monotonic() - last_beat >= self.every:
                last_beat = time.monotonic()
                self._beat()
            elif self.held is not None:
                self._check(self.held)
            if self.lost and self.stop is not None:
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since >= self.grace and not self._stop.is_set():
                    self._end_lost_work(self.stop)

    def _beat(self) -> None:
        try:
            with transaction(self.factory) as session:
                self.lost = not self.touch(session) and not (self.held is not None and self.held(session))
        except Exception:
            log.warning("heartbeat failed; the database may be away", exc_info=True)  # the next beat tries again

    def _check(self, held: Callable[[Session], bool]) -> None:
        try:
            with self.factory() as session:
                self.lost = not held(session)
        except Exception:
            pass  # the database may be away: the next beat says so, and tries again

    def _end_lost_work(self, stop: Callable[[], object]) -> None:
        try:
            stop()
        except Exception:
            log.warning("could not clean up after lost work; reconciliation will", exc_info=True)
        finally:
            log.warning("its claim is gone (cancelled, failed or taken over) and the work goes on: "
                        "ending the worker process")
            end_process(EXIT_STOPPED)

    def _out_of_memory(self, limit: int, give_up: Callable[[str], object]) -> None:
        message = f"it used more than {limit / 2**30:.1f} GiB of memory (TOKENMILL_JOB_MAX_MEMORY_BYTES); {self.memory_advice}"
        try:
            give_up(message)
        finally:
            log.error("%s; ending the worker process", message)
            end_process(EXIT_OVER_MEMORY)


def end_process(code: int) -> None:
    """End this process and every process it started, at once (children first: a trainer's
    child holding the GIL or a pipe would otherwise outlive it)."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            child.kill()
    os._exit(code)


def resident_memory(process: psutil.Process) -> int:
    """Bytes a process and its children hold, by resident set size: cheap to read, but a page a
    forked child shares with its parent counts twice."""
    return rss([process, *process.children(recursive=True)])


def rss(members: list[psutil.Process]) -> int:
    """The resident set sizes of these processes, added up (one that ended meanwhile counts 0)."""
    return _summed(members, lambda member: member.memory_info().rss)


def proportional_memory(process: psutil.Process) -> int:
    """Bytes a process and its children hold, by proportional set size: a shared page counts
    once, but reading it walks every page map (milliseconds per process)."""
    members = [process, *process.children(recursive=True)]
    return _summed(members, lambda member: member.memory_full_info().pss)


def over_memory(process: psutil.Process, limit: int) -> bool:
    """Whether the process and its children hold more than `limit` bytes by PSS, read only when
    their RSS (never less than PSS) passes the limit: once a second, that is the cheap read."""
    return resident_memory(process) > limit and proportional_memory(process) > limit


def _summed(members: list[psutil.Process], size: Callable[[psutil.Process], int]) -> int:
    total = 0
    for member in members:
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            total += size(member)
    return total


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

    with Heartbeat.of_work(factory, model, row_id, attempt, limits, discard_unless_taken_over):
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
            retry_in = RETRY_SECONDS * attempt
            requeue(factory, model, row_id, f"retrying: {unavailable(exc)}", attempt, retry_in)
            raise TransientError(unavailable(exc), retry_in) from exc
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            log.exception("%s %s failed", what, row_id)
            discard()
            fail(factory, model, row_id, describe(exc, what), attempt)
            return Status.FAILED
