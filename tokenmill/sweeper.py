"""The periodic sweeper: re-sends jobs lost between commit and send, fails jobs whose worker died."""

import uuid
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.models import TrainingJob

WORKER_DIED = "the worker stopped reporting (it died, or the job hit its hard time limit); submit the job again"


def sweep(factory: sessionmaker[Session], resend: Callable[[uuid.UUID], None], queued_after: int, running_after: int) -> dict:
    """Re-send stale queued jobs and fail silent running ones; returns what it did."""
    now = utcnow()
    with transaction(factory) as session:
        stale = list(session.scalars(
            select(TrainingJob.id).where(TrainingJob.status == "queued",
                                         TrainingJob.updated_at < now - timedelta(seconds=queued_after))
        ))
        # Touch them so the next sweep waits again before re-sending.
        if stale:
            session.execute(update(TrainingJob).where(TrainingJob.id.in_(stale)).values(updated_at=now))
        dead = session.execute(
            update(TrainingJob)
            .where(TrainingJob.status == "running", TrainingJob.updated_at < now - timedelta(seconds=running_after))
            .values(status="failed", stage="failed", error=WORKER_DIED, finished_at=now, updated_at=now)
        ).rowcount
    for job_id in stale:
        resend(job_id)
    return {"resent": len(stale), "failed": dead}
