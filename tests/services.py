"""The real services tests run against: PostgreSQL, Redis and moto's S3 server over HTTP.

A missing service fails the run with the command that starts it; nothing is skipped.
"""

import os
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import boto3
import redis
from sqlalchemy import create_engine, text

POSTGRES_URL = os.environ.get("TOKENMILL_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("TOKENMILL_TEST_REDIS", "redis://127.0.0.1:6379/0")
# The first of the Redis databases a run's workers consume (two in a row): parallel runs pick apart ones.
REDIS_DB_BASE = int(os.environ.get("TOKENMILL_TEST_REDIS_DB", "7"))
REPO = Path(__file__).resolve().parent.parent
# Small excerpts of the shared corpora, shipped with the tests (tests/corpora/README.md): what a
# fresh clone alone needs. The shared corpora beside the checkout hold the larger texts the
# memory, fault and throughput tests read whole.
FIXTURES = REPO / "tests" / "corpora"
CORPORA = REPO.parent / "shared" / "corpora"
# The API refuses to serve PostgreSQL with the public development secret.
SECRET_KEY = f"test-secret-{uuid.uuid4().hex}"
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception as exc:  # any failure means "not up yet" until the deadline
            error = exc
        else:
            error = None
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout:.0f}s: {error}")
        time.sleep(0.2)


@contextmanager
def postgres_database():
    """A fresh, migrated PostgreSQL database for this test run; dropped afterwards."""
    admin = create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception as exc:
        raise RuntimeError(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc}); start it with "
            "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"
        ) from None
    name = f"tokenmill_test_{uuid.uuid4().hex[:12]}"
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"'))
    url = POSTGRES_URL.rsplit("/", 1)[0] + f"/{name}"
    try:
        from tokenmill.db import migrate

        migrate(url)
        yield url
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def check_redis() -> str:
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=3).ping()
    except Exception as exc:
        raise RuntimeError(
            f"Redis is not reachable at {REDIS_URL} ({exc}); start it with "
            'redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no'
        ) from None
    return REDIS_URL


@contextmanager
def redis_server():
    """A Redis server of this run's own, on a free loopback port (the machine's redis-server binary),
    so that two test runs on one machine never consume each other's Celery tasks; yields its URL.
    TOKENMILL_TEST_REDIS names a server to share instead (its databases from TOKENMILL_TEST_REDIS_DB)."""
    if "TOKENMILL_TEST_REDIS" in os.environ:
        yield check_redis()
        return
    port = free_port()
    try:
        process = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                    "--appendonly", "no", "--databases", "32"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        raise RuntimeError("redis-server is not installed: the tests start a Redis of their own with it") from None
    url = f"redis://127.0.0.1:{port}/0"
    try:
        wait_for(lambda: redis.Redis.from_url(url, socket_timeout=1).ping(), "this run's Redis server")
        yield url
    finally:
        process.terminate()
        process.wait(10)


@contextmanager
def s3_server():
    """moto's standalone S3 server on a free loopback port; yields its endpoint URL."""
    os.environ.update(AWS_ENV)
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        client = boto3.client("s3", endpoint_url=endpoint)
        wait_for(lambda: client.list_buckets() is not None, "moto S3 server")
        yield endpoint
    finally:
        process.terminate()
        process.wait(10)


def make_bucket(endpoint: str, bucket: str) -> None:
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)


@contextmanager
def run_settings(bucket: str = "tokenmill-bench"):
    """Settings on a fresh PostgreSQL database, a Redis server and an S3 server of this run's own (a benchmark's stack)."""
    from tokenmill.settings import Settings

    with postgres_database() as database_url, redis_server() as broker_url, s3_server() as s3_endpoint:
        make_bucket(s3_endpoint, bucket)
        yield Settings(database_url=database_url, broker_url=broker_url,
                       storage_url=f"s3://{bucket}/run-{uuid.uuid4().hex[:8]}", s3_endpoint_url=s3_endpoint,
                       secret_key=SECRET_KEY)
