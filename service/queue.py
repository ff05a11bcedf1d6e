"""Sends tasks to the workers by name, only after the job's row is committed."""

import uuid

from celery import Celery

from tokenmill.settings import Settings, celery_broker

TRAIN_TASK = "tokenmill.train"
EVALUATE_TASK = "tokenmill.evaluate"
STATISTICS_TASK = "tokenmill.corpus_statistics"


class Queue:
    """A Celery producer: it knows task names, not task code."""

    def __init__(self, settings: Settings) -> None:
        url, options = celery_broker(settings)
        self.expires = settings.task_expires
        self.app = Celery("tokenmill-api", broker=url, set_as_current=False)
        self.app.conf.broker_transport_options = options
        self.app.conf.broker_connection_retry_on_startup = True

    def send_training(self, job_id: uuid.UUID) -> None:
        self.app.send_task(TRAIN_TASK, kwargs={"job_id": str(job_id)}, expires=self.expires)

    def send_evaluation(self, run_id: uuid.UUID) -> None:
        self.app.send_task(EVALUATE_TASK, kwargs={"run_id": str(run_id)}, expires=self.expires)

    def send_statistics(self, corpus_id: uuid.UUID) -> None:
        self.app.send_task(STATISTICS_TASK, kwargs={"corpus_id": str(corpus_id)}, expires=self.expires)

    def ping(self) -> None:
        with self.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, timeout=3)

    def close(self) -> None:
        self.app.close()
