"""The parts of work spread over workers: byte ranges of corpora that an attempt of their owner
plans, any worker claims part by part, finishes with the key of what it stored, and that are
forgotten when the owner ends.

Three kinds: a training job's parts to count (`COUNTING`, tokenmill.training.counting), and the
parts of a corpus measured whole (tokenmill.evaluation.parts) by an evaluation run (`MEASURING`)
or by a training job evaluating its version (`MEASURING_FOR_JOBS`). A part's claim is like
any queued work's (claims.py: claimed when queued or silent, counted in `claims`, kept alive by
the heartbeat while its work moves). Its claims are not bounded by the owner's attempts: a part
whose worker failed or stalled is taken again by another, within the owner's own time limit.
"""

import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, delete, exists, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.errors import JobCancelled
from tokenmill.models import (
    UNFINISHED,
    CountPart,
    EvaluationRun,
    JobMeasurePart,
    MeasurePart,
    Status,
    TrainingJob,
    WorkPart,
)
from tokenmill.queued_work.claims import (
    COUNT_PARTS,
    DONE,
    JOB_MEASURE_PARTS,
    MEASURE_PARTS,
    Claims,
    beat,
    claim_row,
    in_attempt,
    silence_cutoff,
)
from tokenmill.queued_work.heartbeat import Heartbeat
from tokenmill.queued_work.lifecycle import fail
from tokenmill.queued_work.limits import WorkLimits

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parts:
    """One kind of parts: its name (on the broker), what its owner is called (in the logs), its
    table, its owner's table, and where it keeps its claims."""

    name: str
    owner_called: str
    model: Any  # type[CountPart] | type[MeasurePart] | type[JobMeasurePart]
    owner_model: Any  # type[TrainingJob] | type[EvaluationRun]
    claims: Claims

    def of(self, owner_id: uuid.UUID, attempt: int) -> ColumnElement[bool]:
        """The parts of this attempt of the owner."""
        condition: ColumnElement[bool] = (self.model.owner_id == owner_id) & (self.model.attempt == attempt)
        return condition

    def running(self, owner_id: uuid.UUID, attempt: int) -> ColumnElement[bool]:
        """While the owner runs in this attempt."""
        return exists().where(self.owner_model.id == owner_id, self.owner_model.status == Status.RUNNING,
                              self.owner_model.attempts == attempt)


COUNTING = Parts("count", "job", CountPart, TrainingJob, COUNT_PARTS)
MEASURING = Parts("measure", "evaluation run", MeasurePart, EvaluationRun, MEASURE_PARTS)
MEASURING_FOR_JOBS = Parts("measure-for-job", "job", JobMeasurePart, TrainingJob, JOB_MEASURE_PARTS)
KINDS = {kind.name: kind for kind in (COUNTING, MEASURING, MEASURING_FOR_JOBS)}


class Planned(NamedTuple):
    """A part as its attempt plans it: a byte range [start, end) of a corpus."""

    corpus_id: uuid.UUID
    start: int
    end: int


def plan_parts(factory: sessionmaker[Session], kind: Parts, owner_id: uuid.UUID, attempt: int,
               parts: Iterable[Planned]) -> None:
    """The parts of this attempt, numbered in order, replacing every earlier attempt's."""
    with transaction(factory) as session:
        forget_parts(session, kind, owner_id)
        session.add_all(kind.model(owner_id=owner_id, attempt=attempt, part=number, corpus_id=part.corpus_id,
                                   start=part.start, end=part.end, status=Status.QUEUED.value, claims=0)
                        for number, part in enumerate(parts))


def the_part(row: WorkPart) -> ColumnElement[bool]:
    """The row of this part, in its owner's attempt."""
    model = type(row)
    condition: ColumnElement[bool] = ((model.owner_id == row.owner_id) & (model.attempt == row.attempt)  # type: ignore[attr-defined]
                                      & (model.part == row.part))
    return condition


def claim_part(factory: sessionmaker[Session], kind: Parts, owner_id: uuid.UUID, attempt: int,
               limits: WorkLimits) -> Any:
    """Claim the first part of the owner's attempt that is queued or silent, while the attempt
    runs; None when none is left to claim."""
    model, of_attempt, runs = kind.model, kind.of(owner_id, attempt), kind.running(owner_id, attempt)
    while True:
        with factory() as session:
            part = session.scalar(select(model.part).where(
                of_attempt, kind.claims.claimable(model, silence_cutoff(limits.silent_after)), runs,
            ).order_by(model.part).limit(1))
        if part is None:
            return None
        number = claim_row(factory, kind.claims, of_attempt & (model.part == part) & runs, limits.silent_after)
        if number is None:
            continue  # another worker took it first
        with factory() as session:
            row = session.get(model, (owner_id, attempt, part))
            if row is not None:
                session.expunge(row)
        if row is not None and row.claims == number:
            return row
        # Planned again by a take-over, or claimed again meanwhile: the next pass says which.


def part_heartbeat(factory: sessionmaker[Session], kind: Parts, row: WorkPart, limits: WorkLimits,
                   done: Callable[[], int]) -> Heartbeat:
    """The heartbeat of a claimed part while it is worked on. It beats only when `done` (the
    documents read so far) moved since its last beat: a worker stalled on a read lets its part
    fall silent, for another worker to take it."""
    last = -1

    def touch(session: Session) -> bool:
        nonlocal last
        now = done()
        if now == last:
            return True  # stalled: no beat, though the claim is still ours
        last = now
        return beat(session, kind.claims, the_part(row), row.claims)

    return Heartbeat(factory, touch, limits)


def finish_part(factory: sessionmaker[Session], kind: Parts, row: WorkPart, result_key: str) -> bool:
    """Record where the part's result is; False if its claim was taken over meanwhile."""
    with transaction(factory) as session:
        return rowcount(session.execute(update(kind.model).where(in_attempt(kind.claims, the_part(row), row.claims))
                                        .values(status=DONE, result_key=result_key, updated_at=utcnow()))) == 1


def finished_keys(factory: sessionmaker[Session], kind: Parts, owner_id: uuid.UUID, attempt: int) -> tuple[int, list[str]]:
    """How many parts the attempt has, and the result keys of the finished ones, in part order."""
    model = kind.model
    with factory() as session:
        rows = session.execute(select(model.status, model.result_key).where(kind.of(owner_id, attempt))
                               .order_by(model.part)).all()
    return len(rows), [key for status, key in rows if status == DONE and key is not None]


def send_helpers(send: Callable[[int], object] | None, most: int, parts: int, what: str) -> None:
    """Ask for up to `most` helpers (never more than the parts beyond the coordinator's first);
    if the broker is away, the coordinator works alone."""
    if send is None or not most or parts <= 1:
        return
    try:
        send(min(most, parts - 1))
    except Exception:
        log.warning("could not send helpers for %s; working alone", what, exc_info=True)


def work_through(factory: sessionmaker[Session], kind: Parts, owner_id: uuid.UUID, attempt: int, total: int,
                 work: Callable[[], object], finished: Callable[[int], object] = lambda count: None) -> list[str]:
    """The coordinator's loop: `work` on the parts no one has claimed (or a silent worker left),
    then wait for the others', telling `finished` how many are done; returns the result keys of
    all `total` parts, in part order. JobCancelled when another attempt planned the parts again
    (the owner is not ours)."""
    while True:
        work()
        planned, done = finished_keys(factory, kind, owner_id, attempt)
        if planned != total:
            raise JobCancelled(str(owner_id))
        finished(len(done))
        if len(done) == total:
            return done
        time.sleep(0.5)


def helper_guard(factory: sessionmaker[Session], kind: Parts, owner_id: uuid.UUID, attempt: int,
                 limits: WorkLimits) -> Heartbeat:
    """A helper task's memory guard: past the limit, the owner's attempt fails with the reason and
    this process exits, as the coordinator's would."""
    return Heartbeat(factory, lambda session: True, limits,
                     lambda message: fail(factory, kind.owner_model, owner_id, message, attempt))


def forget_parts(session: Session, kind: Parts, owner_id: uuid.UUID) -> None:
    """Delete every part of the owner, in every attempt."""
    session.execute(delete(kind.model).where(kind.model.owner_id == owner_id))


def forget_finished(session: Session) -> int:
    """Delete the parts of owners that ended (their coordinator could not); returns how many."""
    deleted = 0
    for kind in KINDS.values():
        ended = select(kind.owner_model.id).where(kind.owner_model.status.not_in(UNFINISHED))
        deleted += rowcount(session.execute(delete(kind.model).where(kind.model.owner_id.in_(ended))))
    return deleted
