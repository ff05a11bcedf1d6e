"""Thin tasks: open the process's resources and call one core function.

A train, evaluate or corpus_statistics message names a queued row, and starts the fair next row
of its kind (tokenmill/queued_work/scheduling.py), or takes its own over if that one fell silent; the
upkeep (sweeper, reconciliation) is not here but in its own process (workers/upkeep.py).
"""

import uuid
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from celery import group
from celery.exceptions import TimeLimitExceeded
from celery.signals import worker_init, worker_process_init
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.statistics_runs import abandon_statistics, run_next_statistics
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.errors import TransientError
from tokenmill.evaluation.parts import MeasureHelpers, Owner, help_measuring
from tokenmill.evaluation.pipeline import abandon_run, run_next_evaluation
from tokenmill.jobs.pipeline import abandon_job, run_next_job
from tokenmill.queued_work import task_names
from tokenmill.queued_work.lifecycle import TIME_LIMIT, TRANSIENT
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.parts import KINDS
from tokenmill.settings import get_settings
from tokenmill.store import ObjectStore, open_store
from tokenmill.training.counting.distributed import Helpers, help_counting
from workers.app import app


@lru_cache
def resources() -> tuple[sessionmaker[Session], ObjectStore]:
    """The session factory and store of this worker process (rebuilt after each fork)."""
    settings = get_settings()
    return make_sessionmaker(make_engine(settings.database_url)), open_store(settings.storage_url, settings.s3_endpoint_url)


@worker_init.connect
def compile_before_forking(**_: Any) -> None:
    # In the worker's main process, before its children are forked: they inherit the compiled
    # merge learner and splitter instead of each compiling them inside a job's memory limit,
    # and the allocator's setting that keeps a job's memory what it uses (`map_large_blocks`).
    from tokenmill.allocator import map_large_blocks
    from tokenmill.training.merge_learner import warm_up
    from tokenmill.training.splitting import counting

    map_large_blocks()
    warm_up()
    counting.warm_up()


@worker_process_init.connect
def reset_after_fork(**_: Any) -> None:
    # Connections must not cross a fork: each child builds its own engine and store clients,
    # now, before any task's time limit runs (the S3 client's imports alone take a second or
    # more on a busy machine).
    resources.cache_clear()
    resources()


# How to fail the row a task's killed child had claimed (found by the task's id).
ABANDON = {
    task_names.TRAIN: lambda factory, store, task_id: abandon_job(factory, store, task_id, TIME_LIMIT),
    task_names.EVALUATE: lambda factory, store, task_id: abandon_run(factory, store, task_id, TIME_LIMIT),
    task_names.STATISTICS: lambda factory, store, task_id: abandon_statistics(factory, task_id),
}


# What a train or evaluate task is sent again for: the row is due again, or the database was away.
RETRIED: tuple[type[BaseException], ...] = (TransientError, *TRANSIENT)


class LimitedTask(app.Task):
    """A task whose hard time limit fails its row at once (not minutes later, by the sweeper)."""

    def on_failure(self, exc: BaseException, task_id: str, args: Any, kwargs: Any, einfo: Any) -> None:
        # On a hard time limit Celery calls this in the worker's main process after killing
        # the child: use a short-lived engine there, never one a forked child could inherit.
        if not isinstance(exc, TimeLimitExceeded) or self.name not in ABANDON:
            return
        settings = get_settings()
        engine = make_engine(settings.database_url)
        try:
            ABANDON[self.name](make_sessionmaker(engine), open_store(settings.storage_url, settings.s3_endpoint_url),
                               task_id)
        finally:
            engine.dispose()


def sender(task: Any, argument: str) -> Callable[[uuid.UUID], None]:
    """Sends `task` for a row, by its id, with the usual expiry."""
    expires = get_settings().task_expires
    return lambda row_id: task.apply_async(kwargs={argument: str(row_id)}, expires=expires)


def retry_in(exc: BaseException, retries: int) -> float:
    """When to send a failed task again: once its row is due again (a second later, so that it
    is), else after a pause that grows with the retries (the claim found the database away)."""
    return exc.retry_in + 1 if isinstance(exc, TransientError) else 10 * (retries + 1)


def send_counters(job_id: uuid.UUID, attempt: int, prefix: str, helpers: int) -> None:
    """A group of count tasks on the broker: each claims and counts parts until none is left."""
    group(count_parts.s(job_id=str(job_id), attempt=attempt, prefix=prefix) for _ in range(helpers)).apply_async(
        expires=get_settings().task_expires)


@app.task(name=task_names.TRAIN, base=LimitedTask, bind=True, ignore_result=True, max_retries=3)
def train(self: Any, job_id: str) -> str:
    factory, store = resources()
    settings = get_settings()
    helpers = Helpers(send_counters, settings.count_helpers, settings.count_part_bytes, settings.max_line_bytes)
    try:
        return run_next_job(factory, store, uuid.UUID(job_id), WorkLimits.of(settings), helpers, self.request.id,
                            sender(train, "job_id"), measure_helpers())
    except RETRIED as exc:  # the claim itself may find the database away
        raise self.retry(exc=exc, countdown=retry_in(exc, self.request.retries)) from exc


@app.task(name=task_names.COUNT_PARTS, ignore_result=True)
def count_parts(job_id: str, attempt: int, prefix: str) -> int:
    # Helps a distributed-counting job; its coordinator re-claims whatever a dead helper left.
    factory, store = resources()
    settings = get_settings()
    limits = WorkLimits.of(settings)
    return help_counting(factory, store, uuid.UUID(job_id), attempt, prefix, limits, settings.max_line_bytes,
                         regex_seconds=limits.regex_seconds)


def send_measurers(owner: Owner, helpers: int) -> None:
    """A group of measure tasks on the broker: each claims and measures parts until none is left."""
    group(measure_parts.s(kind=owner.kind.name, owner_id=str(owner.owner_id), attempt=owner.attempt,
                          prefix=owner.prefix) for _ in range(helpers)).apply_async(expires=get_settings().task_expires)


@app.task(name=task_names.MEASURE_PARTS, ignore_result=True)
def measure_parts(kind: str, owner_id: str, attempt: int, prefix: str) -> int:
    # Helps a run or a job measure a corpus whole; its coordinator re-claims whatever a dead helper left.
    factory, store = resources()
    settings = get_settings()
    return help_measuring(factory, store, Owner(KINDS[kind], uuid.UUID(owner_id), attempt, prefix),
                          WorkLimits.of(settings), settings.max_line_bytes)


def measure_helpers() -> MeasureHelpers:
    """How this worker's runs and jobs get help measuring a corpus whole."""
    settings = get_settings()
    return MeasureHelpers(send_measurers, settings.evaluation_helpers, settings.evaluation_part_bytes,
                          settings.max_line_bytes)


@app.task(name=task_names.EVALUATE, base=LimitedTask, bind=True, ignore_result=True, max_retries=3)
def evaluate(self: Any, run_id: str) -> str:
    factory, store = resources()
    try:
        return run_next_evaluation(factory, store, uuid.UUID(run_id), WorkLimits.of(get_settings()), self.request.id,
                                   sender(evaluate, "run_id"), measure_helpers())
    except RETRIED as exc:
        raise self.retry(exc=exc, countdown=retry_in(exc, self.request.retries)) from exc


@app.task(name=task_names.STATISTICS, base=LimitedTask, bind=True, ignore_result=True)
def corpus_statistics(self: Any, corpus_id: str) -> bool:
    factory, store = resources()
    return run_next_statistics(factory, store, uuid.UUID(corpus_id), WorkLimits.of(get_settings()), self.request.id,
                               sender(corpus_statistics, "corpus_id"))
