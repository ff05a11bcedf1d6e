"""The life of queued work (a training job or an evaluation run) on the worker side.

A row is the truth; a task only carries its id. A worker *claims* the row with one
conditional update (queued → running, or running but silent for `silent_after` seconds,
whose worker is taken for dead), keeps it alive with a *heartbeat* while it works, and
ends it as succeeded, failed, cancelled, or queued again for a retry. A row whose attempts
are used up is failed at its next claim, never run again.

Deliberately not here: what the work is (pipeline.py, evaluation/runs.py) and the periodic
pass that finds silent rows when no delivery comes (sweeper.py).
"""

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum

import psutil
from sqlalchemy import ColumnElement, or_, update
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as SQLTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.errors import TokenmillError
from tokenmill.models import EvaluationRun, Status, TrainingJob
from tokenmill.settings import Settings
from tokenmill.store import TRANSIENT_ERRORS

log = logging.getLogger(__name__)

Work = type[TrainingJob] | type[EvaluationRun]

WORKER_DIED = ("its worker died {attempts} times (killed, out of memory, or its machine lost); "
               "try a smaller corpus (max_sentences) or submit it again")


@dataclass(frozen=True)
class WorkLimits:
    """How a worker runs queued work: attempts, when silence means death, memory."""

    max_attempts: int = 3
    silent_after: float = 120.0
    heartbeat_seconds: float = 10.0
    max_memory: int | None = None

    @classmethod
    def of(cls, settings: Settings) -> "WorkLimits":
        return cls(max_attempts=settings.job_max_attempts, silent_after=settings.sweep_silent_after,
                   heartbeat_seconds=settings.heartbeat_seconds, max_memory=settings.job_max_memory_bytes)


class JobCancelled(Exception):
    """The row is no longer running in this attempt (cancelled, failed or taken over by the sweeper)."""


class TransientError(Exception):
    """A fault worth retrying (database or store unavailable); the job is queued again."""


# Faults of the database worth a retry: it is away or restarting, not the request wrong.
DATABASE_AWAY = (OperationalError, InterfaceError, SQLTimeoutError)
TRANSIENT: tuple[type[BaseException], ...] = (*DATABASE_AWAY, *TRANSIENT_ERRORS)


def unavailable(exc: BaseException) -> str:
    """What a person is told of a transient fault: which service, never its address."""
    what = "the database" if isinstance(exc, DATABASE_AWAY) else "the object store"
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


def claim(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, limits: WorkLimits) -> Claim:
    """queued → running (or a silent running row taken over), counting the attempt."""
    now = utcnow()
    with transaction(factory) as session:
        attempts = session.execute(
            update(model)
            .where(model.id == row_id, or_(model.status == Status.QUEUED,
                                           (model.status == Status.RUNNING)
                                           & (model.updated_at < now - timedelta(seconds=limits.silent_after))))
            .values(status=Status.RUNNING, attempts=model.attempts + 1, started_at=now, updated_at=now, error=None,
                    **stage_of(model, "starting"), **({"progress": 0.0} if model is TrainingJob else {}))
            .returning(model.attempts)
        ).scalar()
    if attempts is None:
        return Claim.SKIPPED
    if attempts > limits.max_attempts:
        fail(factory, model, row_id, WORKER_DIED.format(attempts=attempts - 1))
        return Claim.EXHAUSTED
    return Claim.CLAIMED


def fail(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, message: str,
         attempt: int | None = None) -> bool:
    """running → failed with a message a person can act on; False if it was not running."""
    now = utcnow()
    with transaction(factory) as session:
        return rowcount(session.execute(
            update(model).where(held(model, row_id, attempt))
            .values(status=Status.FAILED, error=message[:4000], finished_at=now, updated_at=now, **stage_of(model, "failed"))
        )) == 1


def requeue(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, reason: str, attempt: int) -> bool:
    """running → queued for another attempt; False if it was not running (or the database is away)."""
    try:
        with transaction(factory) as session:
            return rowcount(session.execute(
                update(model).where(held(model, row_id, attempt))
                .values(status=Status.QUEUED, error=reason[:4000], updated_at=utcnow(), **stage_of(model, "retrying"))
            )) == 1
    except Exception:
        # The database itself may be the fault: the row stays running, falls silent, and the
        # next claim or sweep takes it over.
        log.warning("could not queue %s %s again", model.__tablename__, row_id, exc_info=True)
        return False


class Heartbeat:
    """Touches a claim every `heartbeat_seconds`, and guards this process's memory.

    A thread, so that it beats while a library trains or encodes in native code (both release
    the GIL while they work). `touch` writes the beat and says whether the claim is still
    ours. When the process and its children hold more than `max_memory` bytes, `give_up` is
    told why and the process ends at once (its task is redelivered and finds the row failed):
    the kernel's OOM killer would otherwise pick a process of its own choosing.
    """

    def __init__(self, factory: sessionmaker[Session], touch: Callable[[Session], bool], limits: WorkLimits,
                 give_up: Callable[[str], object] | None = None, check_memory_every: float = 1.0) -> None:
        self.factory, self.touch, self.give_up = factory, touch, give_up
        self.every, self.check_every = limits.heartbeat_seconds, check_memory_every
        self.max_memory = limits.max_memory if give_up is not None else None
        self.lost = False  # the claim is no longer ours (cancelled, failed or taken over)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="heartbeat")

    @classmethod
    def of_work(cls, factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, attempt: int,
                limits: WorkLimits) -> "Heartbeat":
        """The heartbeat of a running training job or evaluation run, in its attempt."""
        def touch(session: Session) -> bool:
            touched = session.execute(update(model).where(held(model, row_id, attempt)).values(updated_at=utcnow()))
            return rowcount(touched) == 1

        return cls(factory, touch, limits, lambda message: fail(factory, model, row_id, message, attempt))

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        process = psutil.Process()
        tick = min(self.every, self.check_every) if self.max_memory else self.every
        last_beat = time.monotonic()
        while not self._stop.wait(tick):
            if self.max_memory and self.give_up is not None and over_memory(process, self.max_memory):
                self._out_of_memory(self.max_memory, self.give_up)
            if time.monotonic() - last_beat >= self.every:
                last_beat = time.monotonic()
                self._beat()

    def _beat(self) -> None:
        try:
            with transaction(self.factory) as session:
                self.lost = not self.touch(session)
        except Exception:
            log.warning("heartbeat failed; the database may be away", exc_info=True)  # the next beat tries again

    def _out_of_memory(self, limit: int, give_up: Callable[[str], object]) -> None:
        message = (f"it used more than {limit / 2**30:.1f} GiB of memory (TOKENMILL_JOB_MAX_MEMORY_BYTES); "
                   "train on fewer documents (max_sentences) or ask for a smaller vocabulary")
        try:
            give_up(message)
        finally:
            log.error("%s; ending the worker process", message)
            os._exit(70)


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
        try:
            total += size(member)
        except psutil.Error:
            pass  # it ended meanwhile
    return total


def run_claimed(factory: sessionmaker[Session], model: Work, row_id: uuid.UUID, attempt: int, limits: WorkLimits,
                work: Callable[[], str], discard: Callable[[], None], what: str) -> str:
    """Run claimed work under its heartbeat and end its row whatever happens; returns its status.

    A cancel ends it 'cancelled'; a transient fault queues it again (TransientError, for the
    task to retry) until its attempts are used up; anything else, a library's panic included
    (pyo3's PanicException is a BaseException), fails it. `discard` removes what it wrote.
    Only the process being told to stop goes on up.
    """
    with Heartbeat.of_work(factory, model, row_id, attempt, limits):
        try:
            return work()
        except JobCancelled:
            discard()
            return Status.CANCELLED
        except TRANSIENT as exc:
            discard()
            if attempt >= limits.max_attempts:
                fail(factory, model, row_id, f"gave up after {attempt} attempts: {unavailable(exc)}", attempt)
                return Status.FAILED
            requeue(factory, model, row_id, f"retrying: {unavailable(exc)}", attempt)
            raise TransientError(unavailable(exc)) from exc
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            log.exception("%s %s failed", what, row_id)
            discard()
            fail(factory, model, row_id, describe(exc, what), attempt)
            return Status.FAILED
