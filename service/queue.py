"""Sends tasks to the workers by name, only after the job's row is committed.

A send that fails is logged, not raised: the row is committed by then, so the request is
answered honestly (the job exists and is queued) and the sweeper re-sends queued work
older than `sweep_queued_after`. Sends are bounded in time: short socket timeouts and two
publish retries, so an unreachable broker costs a request a few seconds, not minutes.
"""

import logging
import uuid

from celery import Celery
from kombu.exceptions import OperationalError

from tokenmill.queued_work import task_names
from tokenmill.settings import Settings, celery_broker

log = logging.getLogger(__name__)


# Redis answers a publish in milliseconds; silence for seconds means it is away.
REDIS_TIMEOUTS = {"socket_connect_timeout": 2, "socket_timeout": 3}
PUBLISH_RETRY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
# What kombu raises once its retries are spent (it wraps the transport's own errors), and socket errors.
SEND_ERRORS = (OperationalError, OSError)


class Queue:
    """A Celery producer: it knows task names, not task code."""

    def __init__(self, settings: Settings) -> None:
        url, options = celery_broker(settings)
        if url.startswith(("redis://", "rediss://")):
            options = {**options, **REDIS_TIMEOUTS}
        self.expires = settings.task_expires
        self.app = Celery("tokenmill-api", broker=url, set_as_current=False)
        self.app.conf.broker_transport_options = options
        self.app.conf.broker_connection_retry_on_startup = True
        self.app.conf.broker_connection_timeout = REDIS_TIMEOUTS["socket_connect_timeout"]
        self.app.conf.task_publish_retry_policy = PUBLISH_RETRY

    def _send(self, task: str, **ids: uuid.UUID) -> bool:
        """Send one task; False (logged) when the broker did not take it."""
        kwargs = {name: str(value) for name, value in ids.items()}
        try:
            self.app.send_task(task, kwargs=kwargs, expires=self.expires)
        except SEND_ERRORS as exc:
            log.warning("broker unavailable: %s %s not sent (the sweeper re-sends it): %s: %s",
                        task, kwargs, type(exc).__name__, exc)
            return False
        return True

    def send_training(self, job_id: uuid.UUID) -> bool:
        return self._send(task_names.TRAIN, job_id=job_id)

    def send_evaluation(self, run_id: uuid.UUID) -> bool:
        return self._send(task_names.EVALUATE, run_id=run_id)

    def send_statistics(self, corpus_id: uuid.UUID) -> bool:
        return self._send(task_names.STATISTICS, corpus_id=corpus_id)

    def ping(self) -> None:
        with self.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)

    def close(self) -> None:
        self.app.close()
