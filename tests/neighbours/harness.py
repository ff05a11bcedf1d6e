"""One attack and the victim's workload at once, with threads and httpx clients; the victim measured.

The attack: `concurrency` threads, each with its own client, sending the attacker's request
(`send(client, n)`, n numbering the requests from 0) until `seconds` have passed or `count`
requests were sent, whichever comes first; or a script of its own (`script(attacker)`) for
attacks with steps (queue jobs, then cancel them). Every answer of the attacker is counted by
status ("timeout" or "error" when there was none).

The victim, meanwhile, with a key of its own: READERS clients list its corpora (GET /v1/corpora,
THINK seconds apart), one client encodes once a second (its own version, then GPT-2's
reference, in turn) and one queues a small job once the attack is at full strength (`cue`), then
reads it until it starts. Reads and encodes stop when the attack has ended; each request may
take VICTIM_TIMEOUT seconds, and one that is not answered 2xx in that time is a failure.

The job's wait is from its row's created_at to its started_at (the database's clock); the
slots it waited are the attacker's jobs that started in between (one slot: the first job
slot to come free was the victim's, or the one after it).
"""

import json
import math
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import httpx

from tests.neighbours.stack import Neighbours, Stack

READERS = 3
THINK = 0.05  # seconds between one reader's requests
ENCODE_EVERY = 1.0  # within the victim's own rate (2 a second, bursts of 20)
VICTIM_TIMEOUT = 30.0
JOB_START_SECONDS = 45.0  # how long the victim's job may wait to start before it counts as never
JOB_POLL = 0.25
VICTIM_JOB = {"vocab_size": 300}
ENCODE_TEXT = "Der Junge spielt im Garten, und die Katze schläft in der Sonne."
FAILURES_KEPT = 20


@dataclass(frozen=True)
class Attack:
    name: str  # the README table's row
    send: Callable[[httpx.Client, int], httpx.Response] | None = None
    concurrency: int = 4
    seconds: float = 12.0
    count: int | None = None
    script: Callable[["Attacker"], None] | None = None  # instead of `send`
    job_after: float = 2.0  # seconds into the attack the victim queues its job (a script cues it itself)
    job_patience: float = JOB_START_SECONDS  # how long the victim's job may wait to start
    request_timeout: float = 120.0


class Attacker:
    """What an attack runs with: clients under the attacker's key, its answers, and the victim's cue."""

    def __init__(self, stack: Stack, key: str, neighbours: Neighbours, request_timeout: float) -> None:
        self.stack, self.key, self.neighbours, self.timeout = stack, key, neighbours, request_timeout
        self.statuses: Counter[str] = Counter()
        self.samples: dict[str, str] = {}  # the first answer of each status other than 2xx
        self.cue = threading.Event()  # the victim queues its job now
        self.victim_job: dict = {}  # the victim's job as submitted, once it is
        self.victim_settled = threading.Event()  # its job started, or will not be waited for any longer
        self._lock = threading.Lock()

    def client(self) -> httpx.Client:
        return self.stack.client(self.key, timeout=self.timeout)

    def cue_after(self, seconds: float) -> None:
        """Cue the victim's job `seconds` from now (the attack is at full strength by then)."""
        timer = threading.Timer(seconds, self.cue.set)
        timer.daemon = True
        timer.start()

    def hold_while_victim_waits(self) -> None:
        """Let the attack last until the victim's job has started (or was given up on)."""
        self.victim_settled.wait(JOB_START_SECONDS + VICTIM_TIMEOUT)

    def count(self, outcome: str) -> None:
        with self._lock:
            self.statuses[outcome] += 1

    def call(self, request: Callable[[], httpx.Response]) -> httpx.Response | None:
        """One request of the attacker, counted by its status."""
        try:
            response = request()
        except httpx.TimeoutException:
            self.count("timeout")
            return None
        except httpx.HTTPError as exc:
            self.count(f"error {type(exc).__name__}")
            return None
        self.count(str(response.status_code))
        if not response.is_success:
            with self._lock:
                self.samples.setdefault(str(response.status_code), response.text[:300])
        return response

    def flood(self, send: Callable[[httpx.Client, int], httpx.Response], concurrency: int, seconds: float,
              count: int | None = None, client: Callable[[], httpx.Client] | None = None) -> None:
        """`concurrency` threads sending until `seconds` have passed or `count` requests were sent."""
        deadline = time.monotonic() + seconds
        numbers = iter(range(count if count is not None else 10**9))
        lock = threading.Lock()

        def loop() -> None:
            with (client or self.client)() as http:
                while time.monotonic() < deadline:
                    with lock:
                        n = next(numbers, None)
                    if n is None:
                        return
                    self.call(lambda: send(http, n))

        threads = [threading.Thread(target=loop, daemon=True) for _ in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


@dataclass(frozen=True)
class Summary:
    n: int
    p50_ms: float | None
    p99_ms: float | None
    max_ms: float | None

    @classmethod
    def of(cls, seconds: list[float]) -> "Summary":
        if not seconds:
            return cls(0, None, None, None)
        ordered = sorted(seconds)
        return cls(len(ordered), _ms(percentile(ordered, 50)), _ms(percentile(ordered, 99)), _ms(ordered[-1]))


def percentile(ordered: list[float], p: float) -> float:
    """The nearest-rank percentile of sorted values."""
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


@dataclass
class Victim:
    """The victim's requests as they went: latencies by kind, and every failure."""

    reads: list[float] = field(default_factory=list)
    encodes: list[float] = field(default_factory=list)
    others: list[float] = field(default_factory=list)  # the job's submission and reads
    failures: list[str] = field(default_factory=list)
    failed: int = 0
    job: dict | None = None  # the victim's job, as last read

    def timed(self, kind: list[float], what: str, request: Callable[[], httpx.Response]) -> httpx.Response | None:
        started = time.perf_counter()
        try:
            response = request()
        except httpx.HTTPError as exc:
            kind.append(time.perf_counter() - started)  # at least that long: a latency too
            self._fail(f"{what}: no answer in {kind[-1]:.1f} s ({type(exc).__name__})")
            return None
        kind.append(time.perf_counter() - started)
        if not response.is_success:
            self._fail(f"{what}: {response.status_code} {response.text[:200]}")
            return None
        return response

    def _fail(self, failure: str) -> None:
        self.failed += 1
        if len(self.failures) < FAILURES_KEPT:
            self.failures.append(failure)


@dataclass(frozen=True)
class Outcome:
    attack: str
    seconds: float
    load_average: float  # the machine's, over the minute before the attack
    reads: Summary
    encodes: Summary
    victim_non_2xx: int  # victim requests not answered 2xx (no answer in VICTIM_TIMEOUT included)
    victim_failures: list[str]
    victim_job_id: str | None
    job_wait_s: float | None  # None: not started (within the attack's job_patience, or given up on)
    slots_waited: int | None  # the attacker's jobs that started while the victim's waited
    jobs_ahead: int | None  # the attacker's jobs queued or running when the victim's was queued
    attacker: dict[str, int]  # the attacker's answers by status
    attacker_samples: dict[str, str]  # the first answer of each status other than 2xx
    api_peak_rss_mib: float

    def as_json(self) -> dict:
        return asdict(self)


def run(stack: Stack, attack: Attack, neighbours: Neighbours, attacker_key: str, victim_key: str,
        give_up_after: int | None = None) -> Outcome:
    """Run the attack and the victim's workload at once; the victim's latencies, failures and job wait.
    `give_up_after`: stop waiting for the victim's job once that many of the attacker's jobs started first."""
    attacker = Attacker(stack, attacker_key, neighbours, attack.request_timeout)
    victim = Victim()
    quiet = threading.Event()  # the attack is over and the victim's job settled: the victim stops
    peak = stack.api_rss()
    load = round(os.getloadavg()[0], 1)
    started = time.monotonic()

    def attack_thread() -> None:
        try:
            if attack.script is not None:
                attack.script(attacker)
            else:
                attacker.cue_after(attack.job_after)
                attacker.flood(attack.send, attack.concurrency, attack.seconds, attack.count)
        finally:
            attacker.cue.set()

    def job_thread() -> None:
        try:
            _job(stack, victim_key, neighbours, victim, attacker, attack.job_patience, give_up_after)
        finally:
            attacker.victim_settled.set()

    busy = [threading.Thread(target=attack_thread, daemon=True), threading.Thread(target=job_thread, daemon=True)]
    victims = [*(threading.Thread(target=_read, args=(stack, victim_key, victim, quiet), daemon=True)
                 for _ in range(READERS)),
               threading.Thread(target=_encode, args=(stack, victim_key, neighbours, victim, quiet), daemon=True)]
    for thread in (*busy, *victims):
        thread.start()
    while any(thread.is_alive() for thread in busy):
        peak = max(peak, stack.api_rss())
        busy[0].join(0.1)
    quiet.set()
    for thread in (*busy, *victims):
        thread.join()
    seconds = time.monotonic() - started
    with stack.client(attacker_key) as http:
        wait, slots, ahead = job_wait(http, victim.job)
    return Outcome(attack=attack.name, seconds=round(seconds, 1), load_average=load, reads=Summary.of(victim.reads),
                   encodes=Summary.of(victim.encodes), victim_non_2xx=victim.failed, victim_failures=victim.failures,
                   victim_job_id=victim.job and victim.job["id"], job_wait_s=wait, slots_waited=slots,
                   jobs_ahead=ahead,
                   attacker=dict(sorted(attacker.statuses.items())), attacker_samples=attacker.samples,
                   api_peak_rss_mib=round(peak / 2**20))


def _read(stack: Stack, key: str, victim: Victim, quiet: threading.Event) -> None:
    with stack.client(key, VICTIM_TIMEOUT) as http:
        while not quiet.is_set():
            victim.timed(victim.reads, "GET /v1/corpora", lambda: http.get("/v1/corpora"))
            quiet.wait(THINK)


def _encode(stack: Stack, key: str, neighbours: Neighbours, victim: Victim, quiet: threading.Event) -> None:
    paths = [f"/v1/tokenizers/{neighbours.victim.tokenizer}/versions/1/encode", "/v1/references/gpt2/encode"]
    with stack.client(key, VICTIM_TIMEOUT) as http:
        n = 0
        while not quiet.is_set():
            path = paths[n % len(paths)]
            victim.timed(victim.encodes, f"POST {path}", lambda: http.post(path, json={"text": ENCODE_TEXT}))
            n += 1
            quiet.wait(ENCODE_EVERY)


def _job(stack: Stack, key: str, neighbours: Neighbours, victim: Victim, attacker: Attacker, patience: float,
         give_up_after: int | None) -> None:
    """Queue the victim's job at the attack's cue, then read it until it starts (`patience` seconds at most)."""
    attacker.cue.wait()
    corpus = neighbours.victim.corpus_id
    body = {"tokenizer": f"victim-{uuid.uuid4().hex[:6]}", "spec": VICTIM_JOB, "train_corpora": [corpus],
            "eval_corpora": [corpus]}
    with stack.client(key, VICTIM_TIMEOUT) as http, attacker.client() as theirs:
        submitted = victim.timed(victim.others, "POST /v1/jobs", lambda: http.post("/v1/jobs", json=body))
        if submitted is None:
            return
        victim.job = attacker.victim_job = submitted.json()
        deadline = time.monotonic() + patience
        path = f"/v1/jobs/{victim.job['id']}"
        polls = 0
        while victim.job["started_at"] is None and victim.job["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(JOB_POLL)
            answer = victim.timed(victim.others, f"GET {path}", lambda: http.get(path))
            victim.job = answer.json() if answer is not None else victim.job
            polls += 1
            if (give_up_after is not None and polls % 8 == 0 and victim.job["started_at"] is None
                    and (job_wait(theirs, victim.job)[1] or 0) >= give_up_after):
                return  # already more than one slot: the outcome is known


def job_wait(attacker: httpx.Client, job: dict | None) -> tuple[float | None, int | None, int | None]:
    """Seconds from the victim's job being queued to its start (None: not started); how many of the
    attacker's jobs started in between; and how many were ahead of it (queued or running when it was
    queued), read with the attacker's client."""
    if job is None:
        return None, None, None
    queued = datetime.fromisoformat(job["created_at"])
    started = datetime.fromisoformat(job["started_at"]) if job["started_at"] else None
    jobs = attacker.get("/v1/jobs", params={"limit": 200}).json()["items"]
    starts = [datetime.fromisoformat(j["started_at"]) for j in jobs if j["started_at"]]
    overtaking = [when for when in starts if queued < when and (started is None or when < started)]
    ahead = [j for j in jobs if datetime.fromisoformat(j["created_at"]) < queued
             and (j["finished_at"] is None or queued < datetime.fromisoformat(j["finished_at"]))]
    wait = None if started is None else round((started - queued).total_seconds(), 1)
    return wait, len(overtaking), len(ahead)


def write_results(outcomes: list[Outcome], path: Path) -> None:
    """build/neighbours.json: one entry per attack."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([outcome.as_json() for outcome in outcomes], indent=2) + "\n")


def table(outcomes: list[Outcome]) -> str:
    """The README's table: attack → the victim's reads, failures, encodes and job wait; the attacker's answers."""
    rows = ["| attack | victim read p50 / p99 / max (ms) | victim non-2xx | victim encode max (ms) | "
            "victim job wait (s; attacker jobs started first) | attacker's answers | API peak RSS (MiB) | load |",
            "|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        wait = "not started" if o.job_wait_s is None else f"{o.job_wait_s:g}"
        answers = ", ".join(f"{status}×{n}" for status, n in o.attacker.items())
        rows.append(f"| {o.attack} | {o.reads.p50_ms} / {o.reads.p99_ms} / {o.reads.max_ms} | {o.victim_non_2xx} | "
                    f"{o.encodes.max_ms} | {wait}; {o.slots_waited} | {answers} | {o.api_peak_rss_mib:g} | "
                    f"{o.load_average:g} |")
    return "\n".join(rows)
