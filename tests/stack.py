"""The running stack: the API and a `tokenmill worker` as real processes, on PostgreSQL, Redis and S3.

One pair per test session, shared by the end-to-end and browser suites (registered in tests/conftest.py).
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests import services

# Short limits so a broken job cannot hold the suite; the sweeper thresholds stay generous.
# The stacks' stuck-regex jobs are there to be cancelled (tests/e2e/test_cancel.py, the neighbours'
# attack): the per-document regex limit, tested on its own (tests/unit/test_regex_limit.py), must
# not end them first on a loaded machine.
LIMITS = {"TOKENMILL_JOB_SOFT_TIME_LIMIT": "240", "TOKENMILL_JOB_HARD_TIME_LIMIT": "300",
          "TOKENMILL_REGEX_DOCUMENT_SECONDS": "90"}


def process_env(settings, redis_db: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(services.AWS_ENV)
    env.update(LIMITS)
    env.update({
        "TOKENMILL_DATABASE_URL": settings.database_url,
        "TOKENMILL_BROKER_URL": settings.broker_url.rsplit("/", 1)[0] + f"/{redis_db}",
        "TOKENMILL_STORAGE_URL": settings.storage_url,
        "TOKENMILL_S3_ENDPOINT_URL": settings.s3_endpoint_url,
        "TOKENMILL_SECRET_KEY": settings.secret_key.get_secret_value(),
    })
    return env


@pytest.fixture(scope="session")
def stack(settings, tmp_path_factory):
    """Base URL of an API process, with a worker process consuming its queue."""
    import redis

    redis_db = services.REDIS_DB_BASE
    redis.Redis.from_url(settings.broker_url.rsplit("/", 1)[0] + f"/{redis_db}").flushdb()
    settle_left_work(settings.database_url)
    env = process_env(settings, redis_db)
    logs = tmp_path_factory.mktemp("logs")
    port = services.free_port()
    tokenmill = [sys.executable, "-m", "tokenmill"]
    worker_log = open(logs / "worker.log", "wb")
    api_log = open(logs / "api.log", "wb")
    worker = subprocess.Popen([*tokenmill, "worker", "--concurrency", "1"], env=env, stdout=worker_log, stderr=subprocess.STDOUT)
    api = subprocess.Popen([*tokenmill, "serve", "--port", str(port)], env=env, stdout=api_log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        services.wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "tokenmill API", 60)
        yield base
    finally:
        for process in (api, worker):
            process.terminate()
        for process in (api, worker):
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
        worker_log.close()
        api_log.close()
        print("worker log tail:\n" + (logs / "worker.log").read_text(errors="replace")[-3000:])


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


@contextmanager
def api_process(settings, log: Path, **env: str) -> Iterator[str]:
    """The base URL of a `tokenmill serve` on the test services, with `env` added to its environment."""
    environment = process_env(settings, services.REDIS_DB_BASE) | env
    port = services.free_port()
    with log.open("wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "tokenmill", "serve", "--port", str(port)],
                                   env=environment, stdout=out, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        try:
            services.wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "tokenmill API", 60)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            print(f"API log tail ({log}):\n" + log.read_text(errors="replace")[-3000:])


@contextmanager
def own_worker(settings, redis_db: int, log: Path, concurrency: int, **env: str) -> Iterator[str]:
    """A `tokenmill worker` of a test's own, on its own broker database (emptied first), once the
    work other suites left is settled; yields that broker's URL, for a Queue to send to."""
    settle_left_work(settings.database_url)  # its worker would start what other suites left queued
    import redis

    redis.Redis.from_url(settings.broker_url.rsplit("/", 1)[0] + f"/{redis_db}").flushdb()
    environment = process_env(settings, redis_db) | env
    with log.open("wb") as out:
        worker = subprocess.Popen([sys.executable, "-m", "tokenmill", "worker", "--concurrency", str(concurrency)],
                                  env=environment, stdout=out, stderr=subprocess.STDOUT)
        try:
            yield environment["TOKENMILL_BROKER_URL"]
        finally:
            worker.terminate()
            worker.wait(30)


LEFT_BEHIND = "left queued or running by an earlier test whose worker is gone"


def settle_left_work(database_url: str) -> None:
    """End the work earlier tests left queued with no worker of theirs (the API and integration
    tests submit without running), or left running when they stopped their worker (a killed
    worker's job falls silent): a worker starts any team's queued row in turn, and a beat's sweeper
    takes a silent one over, before the suite's own. Queued and running jobs and evaluation runs
    are cancelled, statistics no worker took are failed."""
    from sqlalchemy import update

    from tokenmill.db import make_engine, make_sessionmaker, transaction, utcnow
    from tokenmill.models import Corpus, EvaluationRun, Status, TrainingJob
    from tokenmill.queued_work.lifecycle import stage_of

    engine = make_engine(database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            for model in (TrainingJob, EvaluationRun):
                session.execute(update(model).where(model.status.in_((Status.QUEUED, Status.RUNNING))).values(
                    status=Status.CANCELLED, error=LEFT_BEHIND, finished_at=utcnow(), updated_at=utcnow(),
                    **stage_of(model, "cancelled")))
            session.execute(update(Corpus).where(Corpus.statistics.is_(None), Corpus.statistics_error.is_(None),
                                                 Corpus.statistics_claimed_at.is_(None))
                            .values(statistics_error=LEFT_BEHIND))
    finally:
        engine.dispose()
