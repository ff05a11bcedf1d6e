"""The Celery app: configuration and task names only; the settings are read when it is configured."""

import os
from typing import Any

from celery import Celery

from tokenmill.settings import celery_broker, get_settings

# Training uses the tokenizers thread pool inside each prefork child; say so explicitly so
# the library does not disable it (or warn) after the fork.
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

app = Celery("tokenmill", include=["workers.tasks"])


@app.on_configure.connect
def configure(sender: Celery, **_: Any) -> None:
    settings = get_settings()
    url, options = celery_broker(settings)
    sender.conf.update(
        broker_url=url,
        broker_transport_options=options,
        broker_connection_retry_on_startup=True,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_pool="prefork",
        # soft < hard < broker visibility timeout: a stuck job is stopped before it is redelivered.
        task_soft_time_limit=settings.job_soft_time_limit,
        task_time_limit=settings.job_hard_time_limit,
        # A child that still holds this much after a task is replaced by a fresh one (the heartbeat
        # stops one that passes TOKENMILL_JOB_MAX_MEMORY_BYTES during a task): a job's peak memory
        # is then its own, not what an earlier job left in the child (tokenmill.queued_work.progress).
        worker_max_memory_per_child=max(min(settings.worker_keep_memory_bytes,
                                            settings.job_max_memory_bytes // 2) // 1024, 1),
        # No beat schedule: the sweeper and the reconciliation run in the upkeep process
        # (workers/upkeep.py, `tokenmill beat`), never waiting behind training for a slot.
        worker_hijack_root_logger=False,
    )
