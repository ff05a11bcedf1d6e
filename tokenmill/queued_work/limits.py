"""How a worker runs queued work: attempts, silence, memory, running quota, time to stop, from the settings."""

from dataclasses import dataclass

from tokenmill.settings import Settings


@dataclass(frozen=True)
class WorkLimits:
    """How a worker runs queued work: attempts, when silence means death, memory, how many at
    once per team (the running_jobs default, tokenmill.quotas), how long lost work may go on."""

    max_attempts: int = 3
    silent_after: float = 120.0
    heartbeat_seconds: float = 10.0
    max_memory: int | None = None
    running_jobs: int = 2
    # Once its claim is gone, how long work has to notice (at a progress report) before its
    # process is ended; the claim itself is read every second.
    stop_grace: float = 3.0
    # Longest one training document may keep a custom pre_tokenizer_regex busy (tokenmill.training.regex_limit).
    regex_seconds: float = 10.0
    # Work queued again after a transient fault is due after this times its attempts.
    retry_seconds: float = 10.0

    @classmethod
    def of(cls, settings: Settings) -> "WorkLimits":
        return cls(max_attempts=settings.job_max_attempts, silent_after=settings.sweep_silent_after,
                   heartbeat_seconds=settings.heartbeat_seconds, max_memory=settings.job_max_memory_bytes,
                   regex_seconds=settings.regex_document_seconds, retry_seconds=settings.retry_seconds,
                   running_jobs=settings.quota_running_jobs)
