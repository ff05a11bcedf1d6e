"""Fair share: what each team may hold and ask for, and what it holds now.

Every figure has a default in the settings (`TOKENMILL_QUOTA_*`); the operator overrides any
of them per team (`tokenmill teams quota NAME --storage-bytes …`, a `team_quotas` row whose
NULL columns keep the default). A request that would pass one is refused with `OverQuota`
(409, naming the quota, its limit and the team's use) before it costs anything; the request
rate per key is the token bucket of service/rate_limits.py.

    storage_bytes        corpora as stored (decompressed), all of the team's
    corpora              how many corpora
    queued_jobs          training jobs waiting to start (evaluation runs count apart, the same limit)
    running_jobs         training jobs started at once (evaluation runs apart): the scheduler
                         starts no more, so the rest wait queued (tokenmill.queued_work.scheduling)
    concurrent_uploads   uploads streaming at once
    requests_per_minute  expensive requests per API key (encode, BPE steps, cost report,
                         uploads, job submission)
"""

import uuid
from dataclasses import asdict, dataclass, fields, replace

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tokenmill.db import utcnow
from tokenmill.errors import OverQuota
from tokenmill.models import Corpus, EvaluationRun, Status, TeamQuota, TrainingJob
from tokenmill.settings import Settings


@dataclass(frozen=True)
class Quotas:
    storage_bytes: int
    corpora: int
    queued_jobs: int
    running_jobs: int
    concurrent_uploads: int
    requests_per_minute: int

    @classmethod
    def defaults(cls, settings: Settings) -> "Quotas":
        return cls(**{name: getattr(settings, f"quota_{name}") for name in QUOTA_NAMES})

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


QUOTA_NAMES = tuple(f.name for f in fields(Quotas))


def quotas_of(session: Session, team_id: uuid.UUID, settings: Settings) -> Quotas:
    """The team's quotas: the operator's figures where set, the settings' defaults elsewhere."""
    row = session.get(TeamQuota, team_id)
    defaults = Quotas.defaults(settings)
    if row is None:
        return defaults
    return replace(defaults, **{name: getattr(row, name) for name in QUOTA_NAMES if getattr(row, name) is not None})


def set_quotas(session: Session, team_id: uuid.UUID, figures: dict[str, int | None]) -> None:
    """Set (a number) or reset to the default (None) some of a team's quotas; others stay as they are."""
    unknown = set(figures) - set(QUOTA_NAMES)
    if unknown:
        raise ValueError(f"no such quota: {', '.join(sorted(unknown))}")
    row = session.get(TeamQuota, team_id) or TeamQuota(team_id=team_id)
    for name, value in figures.items():
        if value is not None and value < 0:
            raise ValueError(f"{name} must be 0 or more")
        setattr(row, name, value)
    row.updated_at = utcnow()
    session.add(row)
    session.flush()


@dataclass(frozen=True)
class Usage:
    storage_bytes: int
    corpora: int
    queued_jobs: int
    running_jobs: int
    queued_evaluations: int
    running_evaluations: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def usage_of(session: Session, team_id: uuid.UUID) -> Usage:
    """What the team holds now (uploads in flight are counted by the API process that streams them)."""
    storage, corpora = session.execute(
        select(func.coalesce(func.sum(Corpus.bytes), 0), func.count(Corpus.id)).where(Corpus.team_id == team_id)
    ).one()
    jobs = _by_status(session, TrainingJob, team_id)
    runs = _by_status(session, EvaluationRun, team_id)
    return Usage(storage_bytes=int(storage), corpora=int(corpora),
                 queued_jobs=jobs.get(Status.QUEUED, 0), running_jobs=jobs.get(Status.RUNNING, 0),
                 queued_evaluations=runs.get(Status.QUEUED, 0), running_evaluations=runs.get(Status.RUNNING, 0))


def _by_status(session: Session, model: type[TrainingJob] | type[EvaluationRun], team_id: uuid.UUID) -> dict[str, int]:
    rows = session.execute(
        select(model.status, func.count()).where(model.team_id == team_id,
                                                 model.status.in_((Status.QUEUED, Status.RUNNING)))
        .group_by(model.status)
    ).all()
    return {status: int(count) for status, count in rows}


def refuse_over(quota: str, limit: int, used: int, adding: int = 1, what: str = "",
                retry_after: int | None = None) -> None:
    """OverQuota when `used + adding` would pass `limit`: the detail names the quota, its limit and the use."""
    if used + adding <= limit:
        return
    thing = what or quota.replace("_", " ")
    raise OverQuota(f"quota {quota}: your team holds {used} {thing} of {limit}; "
                    + ("wait for some to finish" if retry_after is not None else
                       "delete some, or ask the operator for a larger quota"),
                    quota=quota, limit=limit, used=used, retry_after=retry_after)
