"""The periodic sweeper: re-sends work lost between commit and send, fails work whose worker died.

It covers training jobs, evaluation runs and corpus statistics. "Lost" means still queued
(or, for statistics, still missing and claimed by no worker) after `queued_after` seconds;
"dead" means running with no progress report (for statistics: claimed) for `running_after`
seconds, longer than the hard time limit.
"""

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.models import Corpus, EvaluationRun, TrainingJob

WORKER_DIED = "the worker stopped reporting (it died, or the job hit its hard time limit); submit the job again"

Send = Callable[[uuid.UUID], None]


@dataclass
class Senders:
    """How to send each kind of task again."""

    train: Send
    evaluate: Send
    statistics: Send


def _requeue_stale(session: Session, model, cutoff, now) -> list[uuid.UUID]:
    stale = list(session.scalars(select(model.id).where(model.status == "queued", model.updated_at < cutoff)))
    if stale:
        # Touch them so the next sweep waits again before re-sending.
        session.execute(update(model).where(model.id.in_(stale)).values(updated_at=now))
    return stale


def _fail_dead(session: Session, model, cutoff, now, **values) -> int:
    return session.execute(
        update(model).where(model.status == "running", model.updated_at < cutoff)
        .values(status="failed", error=WORKER_DIED, finished_at=now, updated_at=now, **values)
    ).rowcount


def sweep(factory: sessionmaker[Session], send: Senders, queued_after: int, running_after: int) -> dict[str, int]:
    """Re-send stale queued work and fail silent running work; returns what it did."""
    now = utcnow()
    lost, dead = now - timedelta(seconds=queued_after), now - timedelta(seconds=running_after)
    with transaction(factory) as session:
        jobs = _requeue_stale(session, TrainingJob, lost, now)
        runs = _requeue_stale(session, EvaluationRun, lost, now)
        failed = _fail_dead(session, TrainingJob, dead, now, stage="failed") + _fail_dead(session, EvaluationRun, dead, now)
        # Statistics still missing, and no worker on them (none claimed them, or its claim is older
        # than any task may run).
        corpora = list(session.scalars(select(Corpus.id).where(
            Corpus.statistics.is_(None), Corpus.created_at < lost,
            or_(Corpus.statistics_claimed_at.is_(None), Corpus.statistics_claimed_at < dead))))
    for job_id in jobs:
        send.train(job_id)
    for run_id in runs:
        send.evaluate(run_id)
    for corpus_id in corpora:
        send.statistics(corpus_id)
    return {"resent": len(jobs) + len(runs), "statistics": len(corpora), "failed": failed}
