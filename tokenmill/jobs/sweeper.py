"""The periodic sweeper: re-sends work lost between commit and send, takes over work whose worker died.

It covers training jobs, evaluation runs and corpus statistics, and runs in the upkeep process
(upkeep.py), never on a worker's slots.
- "Lost": still queued `sweep_queued_after` seconds after its last change (the send failed,
  or the broker lost the message): sent again.
- "Silent": running with no heartbeat for `sweep_silent_after` seconds (the worker was
  killed, ran out of memory, lost its machine or its database): queued and sent again
  while it has attempts left, failed otherwise, and a failed job's files are deleted; the
  oldest queued row of a failed row's team is sent (a slot of its running quota is free).
  A live worker beats every `heartbeat_seconds`, also while a library trains in native
  code, so silence is a matter of minutes, whatever the job's time limit.
- Statistics still missing (and not failed), and claimed by no worker or by a silent one
  (their claim beats like a job): sent again.
"""

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.jobs.pipeline import discard, job_prefix
from tokenmill.models import Corpus, EvaluationRun, Status, TrainingJob
from tokenmill.queued_work.claims import CORPUS_STATISTICS
from tokenmill.queued_work.lifecycle import WORKER_DIED, Work, claims_of, stage_of
from tokenmill.queued_work.scheduling import EVALUATION, TRAINING, WorkQueue, next_of_team
from tokenmill.settings import Settings
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)

Send = Callable[[uuid.UUID], None]


@dataclass
class Senders:
    """How to send each kind of task again."""

    train: Send
    evaluate: Send
    statistics: Send


def _requeue_lost(session: Session, model: Work, cutoff: datetime, now: datetime) -> list[uuid.UUID]:
    lost = list(session.scalars(select(model.id).where(model.status == Status.QUEUED, model.updated_at < cutoff)))
    if lost:
        # Touch them so the next sweep waits again before re-sending.
        session.execute(update(model).where(model.id.in_(lost)).values(updated_at=now))
    return lost


def _take_over_silent(session: Session, model: Work, cutoff: datetime, now: datetime,
                      max_attempts: int) -> tuple[list[uuid.UUID], list[uuid.UUID]]:
    """Silent running rows: (queued again, failed)."""
    silent = session.execute(select(model.id, model.attempts).where(claims_of(model).silent(model, cutoff))
                             .with_for_update(skip_locked=True)).all()
    again = [row_id for row_id, attempts in silent if attempts < max_attempts]
    dead = [(row_id, attempts) for row_id, attempts in silent if attempts >= max_attempts]
    if again:
        session.execute(update(model).where(model.id.in_(again))
                        .values(status=Status.QUEUED, error="its worker stopped reporting; retrying", updated_at=now,
                                **stage_of(model, "retrying")))
    for row_id, attempts in dead:
        session.execute(update(model).where(model.id == row_id)
                        .values(status=Status.FAILED, error=WORKER_DIED.format(attempts=attempts), finished_at=now,
                                updated_at=now, **stage_of(model, "failed")))
    return again, [row_id for row_id, _ in dead]


def sweep(factory: sessionmaker[Session], store: ObjectStore, send: Senders, settings: Settings) -> dict[str, int]:
    """Re-send lost work, take over silent work; returns what it did."""
    now = utcnow()
    lost = now - timedelta(seconds=settings.sweep_queued_after)
    silent = now - timedelta(seconds=settings.sweep_silent_after)
    attempts = settings.job_max_attempts
    with transaction(factory) as session:
        jobs = _requeue_lost(session, TrainingJob, lost, now)
        runs = _requeue_lost(session, EvaluationRun, lost, now)
        jobs_again, jobs_dead = _take_over_silent(session, TrainingJob, silent, now, attempts)
        runs_again, runs_dead = _take_over_silent(session, EvaluationRun, silent, now, attempts)
        dead_jobs = list(session.scalars(select(TrainingJob).where(TrainingJob.id.in_(jobs_dead))))
        dead_runs = set(session.scalars(select(EvaluationRun.team_id).where(EvaluationRun.id.in_(runs_dead))))
        corpora = list(session.scalars(select(Corpus.id).where(
            Corpus.created_at < lost, CORPUS_STATISTICS.claimable(Corpus, silent))))
    for job in dead_jobs:
        discard(store, job_prefix(job))
    jobs_next = _next_of_teams(factory, TRAINING, {job.team_id for job in dead_jobs})
    runs_next = _next_of_teams(factory, EVALUATION, dead_runs)
    for job_id in dict.fromkeys(jobs + jobs_again + jobs_next):
        _send(send.train, job_id)
    for run_id in dict.fromkeys(runs + runs_again + runs_next):
        _send(send.evaluate, run_id)
    for corpus_id in corpora:
        _send(send.statistics, corpus_id)
    return {"resent": len(jobs) + len(runs), "retried": len(jobs_again) + len(runs_again),
            "failed": len(jobs_dead) + len(runs_dead), "statistics": len(corpora)}


def _next_of_teams(factory: sessionmaker[Session], queue: WorkQueue, teams: set[uuid.UUID]) -> list[uuid.UUID]:
    # The oldest queued row of each team that a failed row left a slot to.
    return [row_id for team_id in teams if (row_id := next_of_team(factory, queue, team_id)) is not None]


def _send(send: Send, object_id: uuid.UUID) -> None:
    # A broker that is away now leaves the row queued: the next sweep sends it again.
    try:
        send(object_id)
    except Exception:
        log.warning("could not send %s; the next sweep will", object_id, exc_info=True)
