"""Database rows. Alembic (migrations/) is the authority on the schema; these mirror it."""

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import JSON, BigInteger, CheckConstraint, ForeignKey, String, Text, UniqueConstraint, false
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column, relationship

from tokenmill.db import Base, UTCDateTime, utcnow

Json = JSON().with_variant(JSONB(), "postgresql")
Timestamp = UTCDateTime()

class Status(StrEnum):
    """Where a training job or an evaluation run is: queued → running → succeeded | failed | cancelled."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


JOB_STATUSES = tuple(status.value for status in Status)
UNFINISHED = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)


def new_id() -> uuid.UUID:
    return uuid.uuid4()


class Team(Base):
    __tablename__ = "teams"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class TeamQuota(Base):
    """The operator's figures for one team; a NULL column means the settings' default (tokenmill.quotas)."""

    __tablename__ = "team_quotas"

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True)
    storage_bytes: Mapped[int | None] = mapped_column(BigInteger)
    corpora: Mapped[int | None] = mapped_column(BigInteger)
    queued_jobs: Mapped[int | None] = mapped_column(BigInteger)
    running_jobs: Mapped[int | None] = mapped_column(BigInteger)
    concurrent_uploads: Mapped[int | None] = mapped_column(BigInteger)
    requests_per_minute: Mapped[int | None] = mapped_column(BigInteger)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class ApiKey(Base):
    __tablename__ = "api_keys"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    # Only the SHA-256 of the key is kept; the prefix lets a person tell keys apart.
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(Timestamp)

    team: Mapped[Team] = relationship(lazy="raise")


class Corpus(Base):
    __tablename__ = "corpora"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    domain: Mapped[str] = mapped_column(String(100))
    language: Mapped[str] = mapped_column(String(50))
    format: Mapped[str] = mapped_column(String(10))
    text_field: Mapped[str | None] = mapped_column(String(100))
    parallel_group: Mapped[str | None] = mapped_column(String(100))
    storage_key: Mapped[str] = mapped_column(String(500))
    sha256: Mapped[str] = mapped_column(String(64))
    bytes: Mapped[int] = mapped_column(BigInteger)
    lines: Mapped[int] = mapped_column(BigInteger)
    words: Mapped[int] = mapped_column(BigInteger)
    characters: Mapped[int] = mapped_column(BigInteger)
    statistics: Mapped[dict[str, Any] | None] = mapped_column(Json)
    # When a worker began computing the statistics: its claim, so that no other starts them too.
    statistics_claimed_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # The task holding that claim, the claims counted, and why the statistics failed (they end as a job does).
    statistics_claimed_by: Mapped[str | None] = mapped_column(String(200))
    statistics_attempts: Mapped[int] = mapped_column(default=0, server_default="0")
    statistics_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class QueuedWork:
    """The columns a training job and an evaluation run keep their life in, besides `status` and
    `attempts` (tokenmill.queued_work.claims reads them): when it was queued, last touched, started
    and ended, why it failed, which task holds its claim, and when a retry may start."""

    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(Timestamp)
    finished_at: Mapped[datetime | None] = mapped_column(Timestamp)
    # The task (a Celery task id) whose worker holds the current claim.
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    # Queued again after a transient fault: not started before this (tokenmill.queued_work.scheduling).
    retry_at: Mapped[datetime | None] = mapped_column(Timestamp)


class TrainingJob(QueuedWork, Base):
    __tablename__ = "training_jobs"
    __table_args__ = (
        UniqueConstraint("team_id", "idempotency_key"),
        CheckConstraint(f"status IN {JOB_STATUSES}", name="status"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    tokenizer: Mapped[str] = mapped_column(String(200))
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    train_corpus_ids: Mapped[list[str]] = mapped_column(Json)
    eval_corpus_ids: Mapped[list[str]] = mapped_column(Json)
    status: Mapped[str] = mapped_column(String(20), default=Status.QUEUED.value, index=True)
    stage: Mapped[str] = mapped_column(String(50), default="queued")
    progress: Mapped[float] = mapped_column(default=0.0)
    attempts: Mapped[int] = mapped_column(default=0)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    # The SHA-256 of the request that made the job: the same key with another body is refused.
    request_sha256: Mapped[str | None] = mapped_column(String(64))
    version: Mapped[int | None]


class TokenizerVersion(Base):
    """An immutable, numbered tokenizer: it exists only with all of its files in the store."""

    __tablename__ = "tokenizer_versions"
    __table_args__ = (UniqueConstraint("team_id", "name", "version"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[int]
    job_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("training_jobs.id", ondelete="SET NULL"))
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    vocab_size: Mapped[int]
    files: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    lineage: Mapped[dict[str, Any]] = mapped_column(Json)
    train_seconds: Mapped[float]
    peak_memory_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class EvaluationRun(QueuedWork, Base):
    """A queued request to evaluate a version or a reference tokenizer on chosen corpora."""

    __tablename__ = "evaluation_runs"
    __table_args__ = (CheckConstraint(f"status IN {JOB_STATUSES}", name="status"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("tokenizer_versions.id", ondelete="CASCADE"))
    reference: Mapped[str | None] = mapped_column(String(50))
    corpus_ids: Mapped[list[str]] = mapped_column(Json)
    # Every document of each corpus, not the seeded sample (tokenmill.evaluation.measuring).
    whole: Mapped[bool] = mapped_column(default=False, server_default=false())
    status: Mapped[str] = mapped_column(String(20), default=Status.QUEUED.value)
    attempts: Mapped[int] = mapped_column(default=0, server_default="0")


class Evaluation(Base):
    """Metrics of one tokenizer version, or one reference tokenizer, on one corpus."""

    __tablename__ = "evaluations"
    __table_args__ = (
        CheckConstraint("(version_id IS NULL) <> (reference IS NULL)", name="subject"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    version_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("tokenizer_versions.id", ondelete="CASCADE"), index=True
    )
    reference: Mapped[str | None] = mapped_column(String(50))
    corpus_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("evaluation_runs.id", ondelete="CASCADE"))
    word_rule: Mapped[str] = mapped_column(String(50))
    metrics: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class WebSession(Base):
    """A dashboard sign-in: the cookie names this row, and signing out ends it for good."""

    __tablename__ = "web_sessions"

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    # The SHA-256 of the API key signed in with: revoking the key ends its sessions too.
    key_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(Timestamp)


class WorkPart:
    """A byte range [start, end) of a corpus, one of those an attempt of its owner (a job, a run)
    cut its corpora into, that any worker may claim (tokenmill.queued_work.parts); `result_key` is
    where the worker stored what it made of it. The rows of an attempt are replaced when the owner
    is taken over, and deleted when it ends."""

    attempt: Mapped[int] = mapped_column(primary_key=True)
    part: Mapped[int] = mapped_column(primary_key=True)
    corpus_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("corpora.id", ondelete="CASCADE"))
    start: Mapped[int] = mapped_column(BigInteger)
    end: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(String(20), default=Status.QUEUED.value)
    claims: Mapped[int] = mapped_column(default=0)
    updated_at: Mapped[datetime] = mapped_column(Timestamp, default=utcnow)


class CountPart(WorkPart, Base):
    """A part of a training job's corpora to pre-tokenize and count, for a spec that asks for
    `counting: distributed` (tokenmill.training.counting.distributed); its counts are spilled
    under the job's prefix."""

    __tablename__ = "count_parts"

    owner_id: Mapped[uuid.UUID] = mapped_column("job_id", ForeignKey("training_jobs.id", ondelete="CASCADE"),
                                                primary_key=True)
    result_key: Mapped[str | None] = mapped_column("counts_key", String(500))


class MeasurePart(WorkPart, Base):
    """A part of a corpus an evaluation run measures whole, spread over workers
    (tokenmill.evaluation.parts); its metrics' sums are stored under the run's prefix."""

    __tablename__ = "measure_parts"

    owner_id: Mapped[uuid.UUID] = mapped_column("run_id", ForeignKey("evaluation_runs.id", ondelete="CASCADE"),
                                                primary_key=True)
    result_key: Mapped[str | None] = mapped_column(String(500))


class JobMeasurePart(WorkPart, Base):
    """A part of a corpus a training job measures whole when it evaluates its new version, as an
    evaluation run's (MeasurePart); its metrics' sums are stored under the job's prefix."""

    __tablename__ = "job_measure_parts"

    owner_id: Mapped[uuid.UUID] = mapped_column("job_id", ForeignKey("training_jobs.id", ondelete="CASCADE"),
                                                primary_key=True)
    result_key: Mapped[str | None] = mapped_column(String(500))
