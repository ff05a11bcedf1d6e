"""The rows of a distributed count (`count_parts`): planned by a job's attempt, claimed part by part
by any worker, finished with the key of their counts, and forgotten when the job ends.

What a part is and how it is counted is tokenmill.training.counting's; a part's claim is like any
queued work's (claims.py: claimed when queued or silent, counted in `claims`, kept alive by the
heartbeat while its counting moves). Its claims are not bounded by the job's attempts: a part
whose worker failed or stalled is counted again by another, within the job's own time limit.
"""

import uuid
from collections.abc import Callable, Iterable
from typing import NamedTuple

from sqlalchemy import ColumnElement, delete, exists, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.models import UNFINISHED, CountPart, Status, TrainingJob
from tokenmill.queued_work.claims import COUNT_PARTS, COUNTED, beat, claim_row, in_attempt, silence_cutoff
from tokenmill.queued_work.heartbeat import Heartbeat
from tokenmill.queued_work.limits import WorkLimits


class Planned(NamedTuple):
    """A part as its attempt plans it: a byte range [start, end) of a corpus."""

    corpus_id: uuid.UUID
    start: int
    end: int


def plan_parts(factory: sessionmaker[Session], job_id: uuid.UUID, attempt: int, parts: Iterable[Planned]) -> None:
    """The parts of this attempt, numbered in order, replacing every earlier attempt's."""
    with transaction(factory) as session:
        forget_parts(session, job_id)
        session.add_all(CountPart(job_id=job_id, attempt=attempt, part=number, corpus_id=part.corpus_id,
                                  start=part.start, end=part.end, status=Status.QUEUED.value, claims=0)
                        for number, part in enumerate(parts))


def the_part(row: CountPart) -> ColumnElement[bool]:
    """The row of this part, in its job's attempt."""
    return (CountPart.job_id == row.job_id) & (CountPart.attempt == row.attempt) & (CountPart.part == row.part)


def claim_part(factory: sessionmaker[Session], job_id: uuid.UUID, attempt: int, limits: WorkLimits) -> CountPart | None:
    """Claim the first part of the job's attempt that is queued or silent, while the attempt runs;
    None when none is left to claim."""
    of_attempt = (CountPart.job_id == job_id) & (CountPart.attempt == attempt)
    job_runs = exists().where(TrainingJob.id == job_id, TrainingJob.status == Status.RUNNING,
                              TrainingJob.attempts == attempt)
    while True:
        with factory() as session:
            part = session.scalar(select(CountPart.part).where(
                of_attempt, COUNT_PARTS.claimable(CountPart, silence_cutoff(limits.silent_after)), job_runs,
            ).order_by(CountPart.part).limit(1))
        if part is None:
            return None
        number = claim_row(factory, COUNT_PARTS, of_attempt & (CountPart.part == part) & job_runs, limits.silent_after)
        if number is None:
            continue  # another worker took it first
        with factory() as session:
            row = session.get(CountPart, (job_id, attempt, part))
            if row is not None:
                session.expunge(row)
        if row is not None and row.claims == number:
            return row
        # Planned again by a take-over, or claimed again meanwhile: the next pass says which.


def part_heartbeat(factory: sessionmaker[Session], row: CountPart, limits: WorkLimits,
                   counted: Callable[[], int]) -> Heartbeat:
    """The heartbeat of a claimed part while it is counted. It beats only when `counted` (the
    documents read so far) moved since its last beat: a worker stalled on a read lets its part
    fall silent, for another worker to count it."""
    last = -1

    def touch(session: Session) -> bool:
        nonlocal last
        now = counted()
        if now == last:
            return True  # stalled: no beat, though the claim is still ours
        last = now
        return beat(session, COUNT_PARTS, the_part(row), row.claims)

    return Heartbeat(factory, touch, limits)


def finish_part(factory: sessionmaker[Session], row: CountPart, counts_key: str) -> bool:
    """Record where the part's counts are; False if its claim was taken over meanwhile."""
    with transaction(factory) as session:
        return rowcount(session.execute(update(CountPart).where(in_attempt(COUNT_PARTS, the_part(row), row.claims))
                                        .values(status=COUNTED, counts_key=counts_key, updated_at=utcnow()))) == 1


def counted_keys(factory: sessionmaker[Session], job_id: uuid.UUID, attempt: int) -> tuple[int, list[str]]:
    """How many parts the attempt has, and the keys of the counted ones, in part order."""
    with factory() as session:
        rows = session.execute(select(CountPart.status, CountPart.counts_key).where(
            CountPart.job_id == job_id, CountPart.attempt == attempt).order_by(CountPart.part)).all()
    return len(rows), [key for status, key in rows if status == COUNTED and key is not None]


def forget_parts(session: Session, job_id: uuid.UUID) -> None:
    """Delete every part of the job, in every attempt."""
    session.execute(delete(CountPart).where(CountPart.job_id == job_id))


def forget_finished(session: Session) -> int:
    """Delete the parts of jobs that ended (their coordinator could not); returns how many."""
    finished = select(TrainingJob.id).where(TrainingJob.status.not_in(UNFINISHED))
    return rowcount(session.execute(delete(CountPart).where(CountPart.job_id.in_(finished))))
