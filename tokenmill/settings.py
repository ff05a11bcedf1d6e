"""The one settings object: environment variables prefixed TOKENMILL_, read once and cached."""

import os
from functools import lru_cache
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

# `make up` and every `tokenmill` command run in the same folder share one home: ./.tokenmill.
DEFAULT_HOME = Path(".tokenmill")
DEVELOPMENT_SECRET = "change-me-in-production"


COUNT_PART_BYTES = 64 * 1024**2  # the byte range one worker counts at a time (distributed counting)
EVALUATION_PART_BYTES = 128 * 1024**2  # the byte range one worker measures at a time (a whole-corpus evaluation)

class Settings(BaseSettings):
    """Where the database, broker and object store are, and how long jobs may run."""

    model_config = SettingsConfigDict(env_prefix="TOKENMILL_", extra="ignore")

    # Where this instance keeps local state: in embedded mode everything
    # (the three URLs below default to a SQLite file, a local transport and a folder in it).
    home: Path = DEFAULT_HOME
    database_url: str = ""
    # A local Celery transport (a folder) unless a redis:// broker is given.
    broker_url: str = ""
    storage_url: str = ""
    s3_endpoint_url: str | None = None
    secret_key: SecretStr = SecretStr(DEVELOPMENT_SECRET)
    # The API process's database connections: kept, and opened more under load (its request
    # threads are 40: anyio's default). PostgreSQL's own limit (max_connections, 100) bounds the sum
    # over API processes and worker children.
    api_database_pool_size: int = Field(default=20, ge=1, le=500)
    api_database_max_overflow: int = Field(default=20, ge=0, le=500)
    api_database_pool_timeout: float = Field(default=10.0, gt=0)  # a request waits this long for a connection, then 503 Busy
    # Requests inside an API process at once (service/admission.py): below its threads and its
    # pool, or requests wait for both; the others wait their caller's turn, each caller up to
    # `api_waiting_per_caller` of them and up to `api_admission_wait_seconds`, then 503 Busy.
    api_concurrent_requests: int = Field(default=8, ge=1, le=500)
    api_waiting_per_caller: int = Field(default=256, ge=0)
    api_admission_wait_seconds: float = Field(default=30.0, gt=0)

    # Job limits: soft < hard < broker visibility timeout, so a slow job is stopped before redelivery.
    job_soft_time_limit: int = 3 * 3600
    job_hard_time_limit: int = 3 * 3600 + 300
    job_max_attempts: int = 3
    task_expires: int = 24 * 3600
    # The sweeper re-sends queued work older than this (lost between commit and send).
    sweep_queued_after: int = 300

    max_upload_bytes: int = 50 * 1024**3
    max_import_bytes: int = 64 * 1024**2  # an imported tokenizer file (o200k's tokenizer.json is 7 MiB)
    # Hostile input is bounded before it costs anything (docs/operations.md, "Limits").
    max_line_bytes: int = 8 * 1024**2  # one document (a line of text or of JSON), decompressed
    max_json_body_bytes: int = 1024**2  # a JSON request body (uploads are multipart and stream)
    encode_timeout_seconds: float = 5.0  # one playground/API encode, run outside the API process
    # One training document may keep a custom pre_tokenizer_regex busy this long (plus 1 s per
    # million characters), or the job fails naming the regex and the document; presets are not bounded.
    regex_document_seconds: float = Field(default=10.0, gt=0)
    # A worker child over this resident memory fails its job and exits (the kernel's OOM killer never gets to it).
    job_max_memory_bytes: int = 8 * 1024**3
    # A worker child that still holds more than this after a task is replaced by a fresh one, so
    # the next job's peak memory is its own and a big job's memory goes back to the machine.
    worker_keep_memory_bytes: int = Field(default=768 * 1024**2, ge=0)
    # A running job's worker touches its row this often; silent for `sweep_silent_after`, it is taken for dead.
    heartbeat_seconds: float = 10.0
    sweep_silent_after: int = 120
    # Work queued again after a transient fault (a service away) is due after this many seconds times its attempts.
    retry_seconds: float = Field(default=10.0, ge=0)
    sweep_interval: float = 60.0
    # Objects without a row are deleted, and multipart uploads aborted, once older than this.
    orphan_grace_seconds: int = 3600
    # `counting: distributed` jobs: the byte range one worker counts at a time, and how many
    # helper tasks a job sends at most (tokenmill.training.counting.distributed).
    count_part_bytes: int = Field(default=COUNT_PART_BYTES, ge=1024)
    count_helpers: int = Field(default=8, ge=0, le=1000)
    api_url: str = "http://127.0.0.1:8000"
    # How many cores an evaluation uses: its encoders' threads, and its measuring processes on a
    # large corpus (tokenmill.evaluation.measuring); the one setting for evaluation's parallelism.
    evaluation_threads: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1)
    # An evaluation measures a seeded sample of this many bytes' worth of documents per corpus (the
    # same documents for every version and reference), with 95% intervals; 0 measures every corpus whole.
    evaluation_sample_bytes: int = Field(default=64 * 1024**2, ge=0)
    # A corpus measured whole (by an evaluation run) that is larger than this is cut into parts of
    # this size, measured by any worker; a run sends at most `evaluation_helpers` helper tasks
    # (tokenmill.evaluation.parts).
    evaluation_part_bytes: int = Field(default=EVALUATION_PART_BYTES, ge=1024)
    evaluation_helpers: int = Field(default=8, ge=0, le=1000)
    # The share of exact-duplicate documents across a team's corpora is merged in the API process
    # from the corpora's stored hashes (tokenmill.corpora.duplicates), 8 bytes a distinct document
    # of each corpus: past this many in all (40 MB), it is not computed.
    duplicates_max_documents: int = Field(default=5_000_000, ge=0)
    # How many processes a `library: tokenmill` job counts its texts with (tokenmill.training.with_tokenmill).
    # Each job starts this many: on a worker running several jobs at once, cores / concurrency.
    training_processes: int = Field(default_factory=lambda: min(os.cpu_count() or 1, 64), ge=1, le=64)

    # Fair share (tokenmill.quotas): what each team may hold and ask for, unless the operator set
    # other figures for it (`tokenmill teams quota NAME …`).
    quota_storage_bytes: int = Field(default=100 * 1024**3, ge=0)  # corpora as stored (decompressed)
    quota_corpora: int = Field(default=1000, ge=0)
    quota_queued_jobs: int = Field(default=20, ge=0)  # queued training jobs; evaluation runs count apart
    quota_running_jobs: int = Field(default=2, ge=0)  # started at once per team (and evaluation runs apart)
    quota_concurrent_uploads: int = Field(default=2, ge=0)
    quota_requests_per_minute: int = Field(default=600, ge=0)  # expensive endpoints, per API key
    # The token bucket's depth: how many expensive requests a key may send at once before the rate applies.
    rate_burst: int = Field(default=60, ge=1)
    # GET /metrics (Prometheus text): off unless enabled; with a token, only `Authorization: Bearer <token>`.
    metrics_enabled: bool = True
    metrics_token: SecretStr | None = None

    @model_validator(mode="after")
    def _local_defaults(self) -> "Settings":
        self.home = self.home.expanduser().resolve()
        self.database_url = self.database_url or f"sqlite:///{self.home / 'tokenmill.db'}"
        self.broker_url = self.broker_url or f"filesystem://{self.home / 'broker'}"
        self.storage_url = self.storage_url or f"file://{self.home / 'store'}"
        return self

    @property
    def visibility_timeout(self) -> int:
        return self.job_hard_time_limit + 600


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings, read from the environment on first use."""
    return Settings()


def celery_broker(settings: Settings) -> tuple[str, dict[str, object]]:
    """Broker URL and transport options for Celery (plain data: the core imports no Celery).

    `filesystem:///path` is the embedded mode's local transport: kombu's filesystem
    transport, with the folder given in the transport options.
    """
    url = settings.broker_url
    if url.startswith("filesystem://"):
        folder = Path(url.removeprefix("filesystem://") or settings.home / "broker")
        (folder / "queue").mkdir(parents=True, exist_ok=True)
        (folder / "control").mkdir(parents=True, exist_ok=True)
        queue = str(folder / "queue")
        return "filesystem://", {"data_folder_in": queue, "data_folder_out": queue,
                                 "control_folder": str(folder / "control"), "store_processed": False}
    return url, {"visibility_timeout": settings.visibility_timeout}
