"""The neighbour stack: an API (`tokenmill serve`), a worker (`--concurrency 2`) and a beat as real
processes on the run's PostgreSQL, Redis and S3 (no proxies), and the two teams that share it.

Production's settings, except where a test must end in seconds or the shared machine must be
spared: heartbeats every 2 s, silence after 20 s, a sweep every 5 s re-sending work queued for
30 s, a job's time limits at
120/150 s (a job stuck in a regex holds its slot that long at most), a worker child's memory
capped at 3 GiB, and no upload taken for stale (see ENV). The quotas and the encode sandbox keep
their defaults, but for the attacker's storage quota, 256 MiB.

Its Redis database is REDIS_DB_BASE + 4: tests/stack.py takes + 0, the time-limit test + 1, the
fault stack + 2, distributed counting + 3, the job-memory test + 5.
"""

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import redis

from tests import services
from tests.conftest import make_team
from tests.stack import process_env
from tests.waiting import UNFINISHED, until
from tokenmill.db import transaction
from tokenmill.models import Team as TeamRow
from tokenmill.quotas import set_quotas
from tokenmill.teams import issue_key

REDIS_DB = services.REDIS_DB_BASE + 4
ENV = {
    "TOKENMILL_HEARTBEAT_SECONDS": "2",
    "TOKENMILL_SWEEP_SILENT_AFTER": "20",
    "TOKENMILL_SWEEP_INTERVAL": "5",
    # A task message lost on the way (or spent by a claim that found nothing fair to start) is
    # sent again after 30 s, not production's 5 minutes: a test waits for a job for 3 at most.
    "TOKENMILL_SWEEP_QUEUED_AFTER": "30",
    "TOKENMILL_JOB_SOFT_TIME_LIMIT": "120",
    "TOKENMILL_JOB_HARD_TIME_LIMIT": "150",
    "TOKENMILL_JOB_MAX_MEMORY_BYTES": str(3 * 2**30),
    # A corpus measured whole is spread over the worker's slots even at the attacker's 96 KB.
    "TOKENMILL_EVALUATION_PART_BYTES": str(16 * 2**10),
    # moto reports every multipart upload as initiated in 2010, so the reconciliation (every ten
    # sweeps) would abort uploads in flight as stale: a grace of 30 years keeps them.
    "TOKENMILL_ORPHAN_GRACE_SECONDS": str(30 * 365 * 86400),
}
LOG_TAIL = 4000  # characters of each process's log shown when the stack stops

# The attacker's own split regex: it passes the submission probe (its slow input alternates two
# classes, which the probe does not try) and backtracks on SLOW_SEGMENT, about 0.15 s of
# Oniguruma each, under its retry limit (24 pairs would make Oniguruma give up instead).
ATTACKER_REGEX = r"(([ab][cd])+)+e|\s+|[^\sabcde]+"
SLOW_SEGMENT = "ac" * 22 + "!e "
SLOW_LINE = SLOW_SEGMENT * 4  # ~0.6 s, well within the 5 s an encode may take in the sandbox, even loaded
SLOW_LINES = 1000  # a job training on them backtracks for minutes
VICTIM_CORPUS = services.FIXTURES / "fortunes" / "deu_Latn.txt"  # 65 KB
ATTACKER_CORPUS = services.FIXTURES / "code" / "python.txt"  # 96 KB
SMALL_SPEC = {"vocab_size": 500}
ATTACKER_STORAGE_BYTES = 256 * 2**20  # the operator's quota for the attacker: a 512 MiB corpus passes it
IDLE_CPU_SECONDS = 0.1  # the worker's pool used less CPU than this in a second: it is idle


class Stack:
    """The running processes (API, worker, beat), clients of the API, and what settles them."""

    def __init__(self, env: dict[str, str], logs: Path) -> None:
        self.env, self.logs = env, logs
        port = services.free_port()
        self.base = f"http://127.0.0.1:{port}"
        tokenmill = [sys.executable, "-m", "tokenmill"]
        self.commands = {"worker": [*tokenmill, "worker", "--concurrency", "2"], "beat": [*tokenmill, "beat"],
                         "api": [*tokenmill, "serve", "--port", str(port)]}
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> None:
        with (self.logs / f"{name}.log").open("ab") as log:
            self.processes[name] = subprocess.Popen(self.commands[name], env=self.env, stdout=log,
                                                    stderr=subprocess.STDOUT)
        if name == "api":
            services.wait_for(lambda: httpx.get(f"{self.base}/healthz").status_code == 200, "tokenmill API", 60)

    def stop(self, name: str) -> None:
        process = self.processes.pop(name)
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def client(self, key: str, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {key}"}, timeout=timeout)

    def log_tail(self, name: str, chars: int = 1500) -> str:
        """The last `chars` characters of a process's log, its HTTP request lines left out."""
        lines = (self.logs / f"{name}.log").read_text(errors="replace").splitlines()
        return "\n".join(line for line in lines if "HTTP Request" not in line)[-chars:]

    def api_rss(self) -> int:
        """The API process's resident bytes (its sandbox processes apart)."""
        return psutil.Process(self.processes["api"].pid).memory_info().rss

    def api_idle(self) -> bool:
        """Whether the API process (its sandbox processes apart) used (almost) no CPU for a second."""
        return _idle([psutil.Process(self.processes["api"].pid)])

    def worker_children(self) -> list[psutil.Process]:
        return psutil.Process(self.processes["worker"].pid).children(recursive=True)

    def kill_worker_children(self) -> int:
        """kill -9 the worker's pool processes (and theirs); Celery starts new ones."""
        children = self.worker_children()
        for child in children:
            with suppress(psutil.NoSuchProcess):
                child.kill()
        return len(children)

    def worker_idle(self) -> bool:
        """Whether the worker's two pool processes are up and used (almost) no CPU for a second."""
        children = self.worker_children()
        return len(children) >= 2 and _idle(children)


def _idle(processes: list[psutil.Process]) -> bool:
    before = _cpu_seconds(processes)
    time.sleep(1.0)
    return _cpu_seconds(processes) - before < IDLE_CPU_SECONDS


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


@contextmanager
def neighbour_stack(settings, logs: Path, tail: int = LOG_TAIL) -> Iterator[Stack]:
    """An API, a worker of concurrency 2 and a beat on the test services; the last `tail` characters
    of each one's log are printed at the end."""
    redis.Redis.from_url(settings.broker_url.rsplit("/", 1)[0] + f"/{REDIS_DB}").flushdb()
    stack = Stack({**process_env(settings, REDIS_DB), **ENV, "TOKENMILL_HOME": str(logs)}, logs)
    try:
        for name in ("worker", "beat", "api"):
            stack.start(name)
        yield stack
    finally:
        for name in list(stack.processes):
            stack.stop(name)
        for name in stack.commands if tail else ():
            print(f"neighbour {name} log tail:\n" + (logs / f"{name}.log").read_text(errors="replace")[-tail:])


@dataclass(frozen=True)
class Team:
    """A team's prepared state: a corpus, and version 1 of a small tokenizer trained on it."""

    id: uuid.UUID
    corpus_id: str
    tokenizer: str


@dataclass(frozen=True)
class Neighbours:
    attacker: Team
    victim: Team
    slow_corpus_id: str  # the attacker's corpus of SLOW_LINE, on which ATTACKER_REGEX backtracks


def upload(client: httpx.Client, name: str, content: bytes, filename: str = "corpus.txt") -> str:
    response = client.post("/v1/corpora", data={"name": name, "domain": "test", "language": "eng_Latn"},
                           files={"file": (filename, content)})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def submit(client: httpx.Client, tokenizer: str, corpus_id: str, spec: dict) -> str:
    response = client.post("/v1/jobs", json={"tokenizer": tokenizer, "spec": spec, "train_corpora": [corpus_id],
                                             "eval_corpora": [corpus_id]})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def prepare(stack: Stack, sessionmaker) -> Neighbours:
    """Two teams, each with a corpus and a trained version (both trained at once); the attacker's
    splits with ATTACKER_REGEX and it also holds the corpus that regex backtracks on."""
    (attacker, attacker_key), (victim, victim_key) = make_team(sessionmaker), make_team(sessionmaker)
    with transaction(sessionmaker) as session:
        set_quotas(session, attacker.id, {"storage_bytes": ATTACKER_STORAGE_BYTES})
    with stack.client(attacker_key) as bad, stack.client(victim_key) as good:
        corpus = upload(bad, "attacker-code", ATTACKER_CORPUS.read_bytes())
        slow = upload(bad, "attacker-slow", (SLOW_LINE.rstrip() + "\n").encode() * SLOW_LINES)
        victim_corpus = upload(good, "victim-fortunes", VICTIM_CORPUS.read_bytes())
        jobs = [(bad, submit(bad, "attacker-bpe", corpus, {**SMALL_SPEC, "pre_tokenizer": "none",
                                                            "pre_tokenizer_regex": ATTACKER_REGEX})),
                (good, submit(good, "victim-bpe", victim_corpus, SMALL_SPEC))]
        for client, job_id in jobs:
            try:
                job = until(lambda: client.get(f"/v1/jobs/{job_id}").json(),
                            lambda job: job["status"] not in UNFINISHED, 180)
            except AssertionError as unfinished_job:
                raise AssertionError(f"{unfinished_job}\nthe worker's log ends:\n{stack.log_tail('worker')}"
                                     f"\nthe beat's log ends:\n{stack.log_tail('beat', 500)}") from None
            assert job["status"] == "succeeded", job
    return Neighbours(Team(attacker.id, corpus, "attacker-bpe"), Team(victim.id, victim_corpus, "victim-bpe"), slow)


def fresh_key(sessionmaker, team_id: uuid.UUID) -> str:
    """Another API key of the team: each attack starts with a full rate bucket (they are per key)."""
    with transaction(sessionmaker) as session:
        return issue_key(session, session.get(TeamRow, team_id))


def settle(stack: Stack, neighbours: Neighbours, attacker_key: str, victim_key: str) -> None:
    """After an attack: the API idle, the attacker's jobs cancelled and its uploads deleted, the victim's
    jobs ended, the worker idle. Work that outlives its request (an upload the client gave up on) is
    ended by restarting the API; work a cancel does not stop (a job stuck in a regex, an upload's
    statistics), by killing the worker's pool processes, which Celery starts again."""
    if not eventually(stack.api_idle, 10):
        stack.stop("api")
        stack.start("api")
    kept = {neighbours.attacker.corpus_id, neighbours.slow_corpus_id}
    with stack.client(attacker_key) as bad:
        for job in unfinished(bad):
            bad.post(f"/v1/jobs/{job['id']}/cancel")
        for corpus in bad.get("/v1/corpora", params={"limit": 200}).json()["items"]:
            if corpus["id"] not in kept:
                bad.delete(f"/v1/corpora/{corpus['id']}")
    with stack.client(victim_key) as good:
        if not (eventually(lambda: not unfinished(good), 10) and stack.worker_idle()):
            stack.kill_worker_children()
            # A job killed mid-run falls silent, and the sweeper queues it again.
            if not eventually(lambda: not unfinished(good), 60):
                for job in unfinished(good):
                    good.post(f"/v1/jobs/{job['id']}/cancel")
    assert eventually(stack.worker_idle, 60), "the worker is still busy a minute after the attack"


def unfinished(http: httpx.Client) -> list[dict]:
    """The team's jobs still queued or running."""
    return [job for job in http.get("/v1/jobs", params={"limit": 200}).json()["items"] if job["status"] in UNFINISHED]


def eventually(check, seconds: float, every: float = 0.5) -> bool:
    """Whether `check()` holds within `seconds` (asked every `every` seconds)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(every)
    return True
