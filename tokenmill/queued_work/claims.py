"""Claims: how a worker takes a row of queued work, keeps it while it works, and loses it.

Every kind of queued work (a training job, an evaluation run, a corpus's statistics, a part of a
job's corpora to count) keeps its claim in its own row, and one mechanism reads them all:

- A row *waits* for a claim, or *holds* one. A worker claims it with one conditional update:
  waiting → held, or held but *silent* (its beat older than `silent_after` seconds: its worker is
  taken for dead), counting the attempt. The attempt number fences what the claimant writes
  later: a worker taken for dead that wakes up again must not write over the attempt that
  replaced it.
- While the worker works, its heartbeat (tokenmill.queued_work.heartbeat) *beats*: it touches the row's
  beat column in its attempt (and, for work it can stop, learns when the claim is gone).
- A claim past the attempts allowed is *exhausted*: the caller fails the work instead of running
  it again.

The kinds differ only in the columns they keep this in (a job's `status` and `updated_at`, a
corpus's `statistics_claimed_at`, a part's `claims`): `Claims` names them, once per kind,
below. What the work is, and how it ends, is its own module's (lifecycle.py for jobs and runs,
corpora/statistics_runs.py, parts.py); which row of a queue a worker takes next is
scheduling.py's.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, func, select, true, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.models import Corpus, CountPart, EvaluationRun, JobMeasurePart, MeasurePart, Status, TrainingJob

# The claim predicates take the table (or an alias of it).
Rows = Any


class Claimed(NamedTuple):
    row_id: Any
    attempt: int


@dataclass(frozen=True)
class Claims:
    """Where one kind of queued work keeps its claim."""

    name: str
    model: Any
    waiting: Callable[[Rows], ColumnElement[bool]]  # waits for a claim
    held: Callable[[Rows], ColumnElement[bool]]  # holds one, live or silent
    beat: Callable[[Rows], Any]  # the column a heartbeat touches
    attempts: Callable[[Rows], Any]  # the column counting the claims made
    # Still this attempt's, or ended by its own hand (a success): its heartbeat has not lost it.
    kept: Callable[[Rows], ColumnElement[bool]]
    claimed: Callable[[datetime, str | None], dict[Any, Any]]  # the values a claim writes (now, claimant)

    def silent(self, rows: Rows, cutoff: datetime) -> ColumnElement[bool]:
        """Held, with no beat since `cutoff`."""
        silent: ColumnElement[bool] = self.held(rows) & (self.beat(rows) < cutoff)
        return silent

    def claimable(self, rows: Rows, cutoff: datetime) -> ColumnElement[bool]:
        """Waiting, or held by a worker silent since `cutoff`."""
        return self.waiting(rows) | self.silent(rows, cutoff)


def _status_claims(name: str, model: type[TrainingJob] | type[EvaluationRun]) -> Claims:
    def claimed(now: datetime, claimant: str | None) -> dict[Any, Any]:
        return {model.status: Status.RUNNING, model.attempts: model.attempts + 1, model.started_at: now,
                model.updated_at: now, model.error: None, model.claimed_by: claimant, model.retry_at: None,
                **({TrainingJob.stage: "starting", TrainingJob.progress: 0.0} if model is TrainingJob else {})}

    return Claims(name, model, waiting=lambda rows: rows.status == Status.QUEUED,
                  held=lambda rows: rows.status == Status.RUNNING, beat=lambda rows: rows.updated_at,
                  attempts=lambda rows: rows.attempts,
                  kept=lambda rows: rows.status.in_((Status.RUNNING, Status.SUCCEEDED)), claimed=claimed)


def _statistics_missing(rows: Rows) -> ColumnElement[bool]:
    missing: ColumnElement[bool] = rows.statistics.is_(None) & rows.statistics_error.is_(None)
    return missing


JOBS = _status_claims("training", TrainingJob)
RUNS = _status_claims("evaluation", EvaluationRun)
# A corpus's statistics: missing and unclaimed, then claimed (a claim given back after a transient
# fault waits again); they end stored, or with a reason in `statistics_error`.
CORPUS_STATISTICS = Claims(
    "statistics", Corpus,
    waiting=lambda rows: _statistics_missing(rows) & rows.statistics_claimed_at.is_(None),
    held=lambda rows: _statistics_missing(rows) & rows.statistics_claimed_at.is_not(None),
    beat=lambda rows: rows.statistics_claimed_at, attempts=lambda rows: rows.statistics_attempts,
    kept=lambda rows: true(),  # whatever this attempt ended with (stored or failed) was its own
    claimed=lambda now, claimant: {Corpus.statistics_claimed_at: now,
                                   Corpus.statistics_attempts: Corpus.statistics_attempts + 1,
                                   Corpus.statistics_claimed_by: claimant})
DONE = "done"  # a part's status once its result is stored


def _part_claims(name: str, model: type[CountPart] | type[MeasurePart] | type[JobMeasurePart]) -> Claims:
    return Claims(name, model, waiting=lambda rows: rows.status == Status.QUEUED.value,
                  held=lambda rows: rows.status == Status.RUNNING.value, beat=lambda rows: rows.updated_at,
                  attempts=lambda rows: rows.claims, kept=lambda rows: rows.status.in_((Status.RUNNING.value, DONE)),
                  claimed=lambda now, claimant: {model.status: Status.RUNNING.value, model.claims: model.claims + 1,
                                                 model.updated_at: now})


COUNT_PARTS = _part_claims("count parts", CountPart)
MEASURE_PARTS = _part_claims("measure parts", MeasurePart)
JOB_MEASURE_PARTS = _part_claims("job measure parts", JobMeasurePart)


def silence_cutoff(silent_after: float, now: datetime | None = None) -> datetime:
    """Before this time, a held claim's worker is taken for dead."""
    return (now or utcnow()) - timedelta(seconds=silent_after)


def claim_row(factory: sessionmaker[Session], claims: Claims, row: ColumnElement[bool], silent_after: float,
              claimant: str | None = None, silent_only: bool = False) -> int | None:
    """Claim the row `row` selects if it waits (unless `silent_only`) or its claim fell silent,
    counting the attempt; returns the attempt, or None if it was not claimable."""
    now = utcnow()
    table, cutoff = claims.model, silence_cutoff(silent_after, now)
    claimable = claims.silent(table, cutoff) if silent_only else claims.claimable(table, cutoff)
    with transaction(factory) as session:
        attempt: int | None = session.execute(
            update(table).where(row, claimable).values(claims.claimed(now, claimant)).returning(claims.attempts(table))
        ).scalar()
    return attempt


def claim_by_id(factory: sessionmaker[Session], claims: Claims, row_id: Any, max_attempts: int, silent_after: float,
                claimant: str | None, exhausted: Callable[[Claimed], object], silent_only: bool = False) -> Claimed | None:
    """`claim_row` of the row with this id; a claim past `max_attempts` goes to `exhausted` (to end
    the work) instead, and None is returned, as when the row was not claimable."""
    attempt = claim_row(factory, claims, claims.model.id == row_id, silent_after, claimant, silent_only)
    if attempt is None:
        return None
    claimed = Claimed(row_id, attempt)
    if attempt > max_attempts:
        exhausted(claimed)
        return None
    return claimed


def in_attempt(claims: Claims, row: ColumnElement[bool], attempt: int | None = None) -> ColumnElement[bool]:
    """The row while it holds its claim (in the given attempt)."""
    condition = row & claims.held(claims.model)
    return condition if attempt is None else condition & (claims.attempts(claims.model) == attempt)


def beat(session: Session, claims: Claims, row: ColumnElement[bool], attempt: int) -> bool:
    """Touch the claim in its attempt; False if the attempt holds it no more."""
    return rowcount(session.execute(
        update(claims.model).where(in_attempt(claims, row, attempt)).values({claims.beat(claims.model): utcnow()})
    )) == 1


def kept(session: Session, claims: Claims, row: ColumnElement[bool], attempt: int) -> bool:
    """Whether the attempt still holds the claim, or ended the work itself."""
    table = claims.model
    found = session.scalar(select(func.count()).select_from(table).where(
        row, claims.attempts(table) == attempt, claims.kept(table)))
    return bool(found)
