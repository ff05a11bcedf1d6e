"""Fair scheduling: which queued row a free worker slot starts.

A task message is a ticket to start the next fair row, not only its own. The worker that takes
one claims, with one conditional update, the oldest queued row of the team least recently
served (whose latest start is the oldest; a team never served comes first, then the one whose
queued row is oldest), among the teams with queued work and fewer rows running than their
`running_jobs` quota (tokenmill.quotas). A row queued again after a transient fault waits until
its `retry_at` (its own retry message comes then), so an outage does not use up its attempts. So one team's backlog delays another team's next row
by at most one slot, and no team runs more than its quota at once. Training jobs, evaluation
runs and corpus statistics are three queues, each scheduled and counted apart.

Messages stay one per queued row (the API sends one at submission, the sweeper re-sends rows
queued too long). A message that finds nothing to claim (every team with queued work at its
quota) ends quietly; so the row that ends frees a slot of its team, and its worker sends one
wake-up for the team's oldest queued row (`next_of_team`).

Concurrency: on PostgreSQL a claimer locks its candidate team's row (FOR NO KEY UPDATE, which
inserts of the team's rows do not wait for), so two claimers for one team count its running
rows one after the other, and skips queued rows another transaction holds (SKIP LOCKED). On
SQLite (embedded mode), which writes one statement at a time, the conditional update alone is
the guard: it claims only a row still queued, of a team still below its quota.

Deliberately not here: weights or priorities between teams, and preemption (a running row keeps
its slot to its end); a silent row is taken over by its own message (`claim_in_turn`).
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, case, func, select, true, update
from sqlalchemy.orm import Session, aliased, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.models import Team, TeamQuota
from tokenmill.queued_work.claims import CORPUS_STATISTICS, JOBS, RUNS, Claimed, Claims, Rows, claim_by_id
from tokenmill.queued_work.limits import WorkLimits

Wake = Callable[[uuid.UUID], None]  # sends a task message for a queued row



@dataclass(frozen=True)
class WorkQueue:
    """How one kind of queued work is scheduled: its claims (claims.py), which waiting rows may
    start now, which count against the team's running quota, and when a team was last served."""

    claims: Claims
    due: Callable[[Rows, datetime], ColumnElement[bool]]  # of the waiting rows, those that may start now
    running: Callable[[Rows, datetime], ColumnElement[bool]]  # (rows, the silence cutoff)
    served: Callable[[Rows], Any]  # a row's latest start: a team's latest is its turn

    @property
    def model(self) -> Any:
        return self.claims.model

    def queued(self, rows: Rows) -> ColumnElement[bool]:
        return self.claims.waiting(rows)


def _status_queue(claims: Claims) -> WorkQueue:
    return WorkQueue(claims, due=lambda rows, now: rows.retry_at.is_(None) | (rows.retry_at <= now),
                     running=lambda rows, _: claims.held(rows), served=lambda rows: rows.started_at)


TRAINING = _status_queue(JOBS)
EVALUATION = _status_queue(RUNS)
# A corpus's statistics run while their claim beats (a silent claim is taken over by the corpus's
# own message, re-sent by the sweeper).
STATISTICS = WorkQueue(CORPUS_STATISTICS, due=lambda rows, now: true(),
                       running=lambda rows, cutoff: CORPUS_STATISTICS.held(rows) & (rows.statistics_claimed_at >= cutoff),
                       served=lambda rows: rows.statistics_claimed_at)


def claim_in_turn(factory: sessionmaker[Session], queue: WorkQueue, row_id: uuid.UUID, limits: WorkLimits,
                  claimant: str | None, exhausted: Callable[[Claimed], object]) -> Claimed | None:
    """What a task message for `row_id` claims: that row if its claim fell silent (taken over),
    else the fair next row of any team; a row claimed past its attempts goes to `exhausted` (to
    be failed). None when every team with queued work runs its quota (a row that ends sends a
    message then)."""
    return (claim_by_id(factory, queue.claims, row_id, limits.max_attempts, limits.silent_after, claimant, exhausted,
                        silent_only=True)
            or claim_next(factory, queue, limits, claimant, exhausted))


def claim_next(factory: sessionmaker[Session], queue: WorkQueue, limits: WorkLimits, claimant: str | None = None,
               exhausted: Callable[[Claimed], object] | None = None) -> Claimed | None:
    """Claim the fair next row of the queue (see the module's docstring); None when no team with
    queued work is below its quota. A row claimed past its attempts goes to `exhausted` (to be
    failed), and the next one is claimed instead."""
    while True:
        claimed = _claim_fairly(factory, queue, limits, claimant)
        if claimed is None or claimed.attempt <= limits.max_attempts or exhausted is None:
            return claimed
        exhausted(claimed)


def _claim_fairly(factory: sessionmaker[Session], queue: WorkQueue, limits: WorkLimits,
                   claimant: str | None) -> Claimed | None:
    now = utcnow()
    with factory() as session:
        teams = teams_in_turn(session, queue, now, limits)
    for team_id in teams:  # one transaction per team: a claimer never holds two teams' locks
        claimed = _claim_of_team(factory, queue, team_id, limits, claimant)
        if claimed is not None:
            return claimed
    return None


def teams_in_turn(session: Session, queue: WorkQueue, now: datetime, limits: WorkLimits) -> list[uuid.UUID]:
    """The teams with queued work and room under their running quota, the least recently served first."""
    rows, waiting = aliased(queue.model), aliased(queue.model)
    cutoff = now - timedelta(seconds=limits.silent_after)
    per_team = (
        select(rows.team_id.label("team_id"), func.max(queue.served(rows)).label("served"),
               func.min(case((queue.queued(rows) & queue.due(rows, now), rows.created_at))).label("oldest"),
               func.count(case((queue.running(rows, cutoff), 1))).label("running"))
        .where(rows.team_id.in_(select(waiting.team_id).where(queue.queued(waiting), queue.due(waiting, now))))
        .group_by(rows.team_id).subquery()
    )
    return list(session.scalars(
        select(per_team.c.team_id).where(per_team.c.running < _quota(per_team.c.team_id, limits.running_jobs))
        .order_by(per_team.c.served.asc().nulls_first(), per_team.c.oldest, per_team.c.team_id)
    ))


def _claim_of_team(factory: sessionmaker[Session], queue: WorkQueue, team_id: uuid.UUID, limits: WorkLimits,
                   claimant: str | None) -> Claimed | None:
    # The team's oldest queued row, if the team is still below its quota when the update runs.
    table, candidates, others = queue.model, aliased(queue.model), aliased(queue.model)
    now = utcnow()
    cutoff = now - timedelta(seconds=limits.silent_after)
    oldest = (select(candidates.id).where(candidates.team_id == team_id, queue.queued(candidates),
                                          queue.due(candidates, now))
              .order_by(candidates.created_at, candidates.id).limit(1).with_for_update(skip_locked=True)
              .scalar_subquery())
    running = (select(func.count()).select_from(others).where(others.team_id == team_id, queue.running(others, cutoff))
               .scalar_subquery())
    with transaction(factory) as session:
        # PostgreSQL: claimers of one team take turns here, so each counts the others' claims.
        session.execute(select(Team.id).where(Team.id == team_id).with_for_update(key_share=True))
        row = session.execute(
            update(table).where(table.id == oldest, queue.queued(table), running < _quota(team_id, limits.running_jobs))
            .values(queue.claims.claimed(now, claimant)).returning(table.id, queue.claims.attempts(table))
        ).first()
    return None if row is None else Claimed(row[0], row[1])


def _quota(team_id: Any, default: int) -> ColumnElement[int]:
    """The team's running_jobs quota: the operator's figure, else the settings' default."""
    return func.coalesce(select(TeamQuota.running_jobs).where(TeamQuota.team_id == team_id).scalar_subquery(), default)


def next_of_team(factory: sessionmaker[Session], queue: WorkQueue, team_id: uuid.UUID) -> uuid.UUID | None:
    """The team's oldest queued row, if any."""
    table = queue.model
    with factory() as session:
        return session.scalar(select(table.id).where(table.team_id == team_id, queue.queued(table))
                              .order_by(table.created_at).limit(1))


def wake_team_of(factory: sessionmaker[Session], queue: WorkQueue, row_id: uuid.UUID, wake: Wake) -> None:
    """Once a row has ended, send a message for its team's oldest queued row, if any: the slot of
    the team's quota it held is free, and the message that came for that row may have found the
    team at its quota, and ended."""
    table = queue.model
    with factory() as session:
        team_id = session.scalar(select(table.team_id).where(table.id == row_id))
    if team_id is not None and (queued := next_of_team(factory, queue, team_id)) is not None:
        wake(queued)
