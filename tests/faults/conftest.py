"""The fault stack: an API, a worker and the sweeper's beat as real processes, whose
PostgreSQL, S3 and broker connections run through TCP proxies the tests cut and restore.

The machine's services are never stopped; only the proxies are. Heartbeats, silence and
sweeps are shortened so that each fault ends within seconds, as it would within minutes
with the defaults. Each scenario records how long its job took to end after the fault
(`build/faults.json`, the README's reliability table).
"""

import contextlib
import json
import signal
import subprocess
import sys
import time
import uuid
from urllib.parse import urlparse

import httpx
import psutil
import pytest
import redis

from tests import services
from tests.faults.proxy import TcpProxy
from tests.stack import process_env, settle_left_work

FAST = {
    "TOKENMILL_HEARTBEAT_SECONDS": "1",
    "TOKENMILL_SWEEP_SILENT_AFTER": "6",
    "TOKENMILL_SWEEP_INTERVAL": "2",
    "TOKENMILL_SWEEP_QUEUED_AFTER": "4",
    "TOKENMILL_ORPHAN_GRACE_SECONDS": "0",
    "TOKENMILL_RETRY_SECONDS": "2",  # a store that was away is back by then (test_faults restores it at the retry)
    "TOKENMILL_COUNT_PART_BYTES": str(2 * 2**20),  # `counting: distributed` jobs: many parts on a small corpus
    "TOKENMILL_EVALUATION_PART_BYTES": str(2 * 2**20),  # a corpus measured whole: many parts too
}
RESULTS = services.REPO / "build" / "faults.json"
OUTCOMES: list[dict] = []


class FaultStack:
    """The running processes, their proxies and an authenticated client."""

    def __init__(self, base: str, worker: subprocess.Popen, proxies: dict[str, TcpProxy], worker_env: dict[str, str],
                 log) -> None:
        self.base, self.worker, self.worker_env, self.log = base, worker, worker_env, log
        self.more_workers: list[subprocess.Popen] = []
        # The worker's database, the API's database, the store (both processes'), the API's broker.
        self.database, self.api_database = proxies["database"], proxies["api_database"]
        self.s3, self.broker = proxies["s3"], proxies["broker"]

    def kill_worker_children(self) -> int:
        """kill -9 every process the worker's pool runs (the job's, and its shard processes)."""
        children = psutil.Process(self.worker.pid).children(recursive=True)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.send_signal(signal.SIGKILL)
        return len(children)

    def start_worker(self, concurrency: int = 1) -> subprocess.Popen:
        """Another worker on the same broker and database, as a second machine would run."""
        worker = subprocess.Popen([sys.executable, "-m", "tokenmill", "worker", "--concurrency", str(concurrency)],
                                  env=self.worker_env, stdout=self.log, stderr=subprocess.STDOUT)
        self.more_workers.append(worker)
        return worker


def kill_tree(pid: int) -> None:
    """kill -9 a process and every process under it (a worker and its pool: the machine is lost)."""
    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(signal.SIGKILL)


def _port(url: str) -> tuple[str, int]:
    parsed = urlparse(url.replace("postgresql+psycopg", "postgresql"))
    return parsed.hostname, parsed.port


# Package-scoped: its sweeper stops with the fault tests, so it never sends other suites' queued jobs.
@pytest.fixture(scope="package")
def fault_stack(settings, tmp_path_factory):
    redis_db = services.REDIS_DB_BASE + 2
    broker_url = settings.broker_url.rsplit("/", 1)[0] + f"/{redis_db}"
    redis.Redis.from_url(broker_url).flushdb()
    settle_left_work(settings.database_url)
    proxies = {"database": TcpProxy(*_port(settings.database_url)), "api_database": TcpProxy(*_port(settings.database_url)),
               "s3": TcpProxy(*_port(settings.s3_endpoint_url)), "broker": TcpProxy(*_port(broker_url))}
    s3_url = proxies["s3"].url_for(settings.s3_endpoint_url)
    env = {**process_env(settings, redis_db), **FAST, "TOKENMILL_S3_ENDPOINT_URL": s3_url}
    logs = tmp_path_factory.mktemp("fault-logs")
    worker_env = {**env, "TOKENMILL_HOME": str(logs),
                  "TOKENMILL_DATABASE_URL": proxies["database"].url_for(settings.database_url)}
    api_env = {**env, "TOKENMILL_BROKER_URL": proxies["broker"].url_for(broker_url),
               "TOKENMILL_DATABASE_URL": proxies["api_database"].url_for(settings.database_url)}
    worker_log, api_log = open(logs / "worker.log", "wb"), open(logs / "api.log", "wb")
    tokenmill = [sys.executable, "-m", "tokenmill"]
    worker = subprocess.Popen([*tokenmill, "worker", "--concurrency", "2"], env=worker_env,
                              stdout=worker_log, stderr=subprocess.STDOUT)
    # The upkeep of its own, as in production: killing the worker's children never stops the sweeps.
    beat = subprocess.Popen([*tokenmill, "beat"], env=worker_env, stdout=worker_log, stderr=subprocess.STDOUT)
    port = services.free_port()
    api = subprocess.Popen([*tokenmill, "serve", "--port", str(port)], env=api_env, stdout=api_log,
                           stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    stack = FaultStack(base, worker, proxies, worker_env, worker_log)
    try:
        services.wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "tokenmill API", 60)
        yield stack
    finally:
        for process in stack.more_workers:
            kill_tree(process.pid)
        for process in (api, beat, worker):
            process.terminate()
        for process in (api, beat, worker):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        for proxy in proxies.values():
            proxy.cut()
        worker_log.close()
        api_log.close()
        print("fault worker log tail:\n" + (logs / "worker.log").read_text(errors="replace")[-4000:])
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(OUTCOMES, indent=2) + "\n")


@pytest.fixture
def faults_http(fault_stack, team_key):
    _, key = team_key
    with httpx.Client(base_url=fault_stack.base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        yield client


def record(scenario: str, outcome: str, seconds: float) -> None:
    """One row of the reliability table."""
    OUTCOMES.append({"scenario": scenario, "outcome": outcome, "seconds": round(seconds, 1)})


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def elapsed(since: float) -> float:
    return time.monotonic() - since

