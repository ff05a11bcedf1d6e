"""Metadata under load (issue 22, item 4): 50 keep-alive clients on each metadata route of the API
process (`tokenmill serve`), alternating with a bare FastAPI + SQLAlchemy endpoint doing what
`GET /v1/corpora` does (benchmarks/bare_api.py) on the same database, each for `--seconds`; per
route its requests/s, its ratio to the bare endpoint's of the same round, p50 and p99 latency and
every answer that was not 2xx, and meanwhile /healthz probed every 0.5 s as a load balancer would.
Goal: every route ≥ 0.6× the bare endpoint, no answer other than 2xx, /healthz always 200.

The production-like stack of the neighbour tests: a fresh PostgreSQL database, a Redis server and
moto's S3 server of the run's own, the API, a worker (concurrency 2) and a beat as processes. One
team with `--corpora` corpora and a trained version. With `--training`, another team's 32k jobs
(library tokenmill, a `--training-mb` MB corpus) train on the machine's worker the whole time.
`--clients 150` is the flood that used to stall the process (docs/operations.md, "Requests in turn").

    .venv/bin/python -m benchmarks.metadata_load
    .venv/bin/python -m benchmarks.metadata_load --training
    .venv/bin/python -m benchmarks.metadata_load --clients 150 --rounds 1
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from benchmarks.train_speed import corpus_file
from tests import load as http_load
from tests import services
from tests.conftest import make_team
from tests.neighbours.stack import Stack, eventually, submit, upload
from tests.stack import process_env
from tests.waiting import UNFINISHED, until
from tokenmill.db import make_engine, make_sessionmaker

REDIS_DB = 0  # the run's own Redis server
VERSION_SPEC = {"vocab_size": 500}
TRAINING_SPEC = {"vocab_size": 32000, "library": "tokenmill"}
MB = 1_000_000


def routes(tokenizer: str) -> dict[str, str]:
    """The metadata routes measured: path of each."""
    return {"GET /v1/corpora": "/v1/corpora", "GET /v1/tokenizers/{name}/versions/1": f"/v1/tokenizers/{tokenizer}/versions/1",
            "GET /v1/dashboard/fertility": "/v1/dashboard/fertility", "GET /v1/jobs": "/v1/jobs",
            "GET /v1/team": "/v1/team"}


class HealthProbe:
    """GET /healthz every `every` seconds meanwhile, as a load balancer would: its latencies and failures."""

    def __init__(self, base: str, every: float = 0.5) -> None:
        self.base, self.every = base, every
        self.latencies: list[float] = []
        self.failures = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._probe, daemon=True)

    def __enter__(self) -> "HealthProbe":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()

    def _probe(self) -> None:
        with httpx.Client(base_url=self.base, timeout=10) as client:
            while not self.stop.wait(self.every):
                started = time.perf_counter()
                try:
                    ok = client.get("/healthz").status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.latencies.append(time.perf_counter() - started)
                self.failures += not ok

    def summary(self) -> dict:
        ordered = sorted(self.latencies) or [float("nan")]
        return {"healthz_max_ms": round(ordered[-1] * 1000, 1), "healthz_failures": self.failures}


def start_bare(env: dict[str, str], logs: Path) -> tuple[subprocess.Popen, str]:
    port = services.free_port()
    with (logs / "bare.log").open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "uvicorn", "benchmarks.bare_api:create_app", "--factory",
                                    "--port", str(port), "--log-level", "warning"], env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    services.wait_for(lambda: _answers(f"{base}/openapi.json"), "the bare endpoint", 60)
    return process, base


def _answers(url: str) -> bool:
    try:
        return httpx.get(url).status_code == 200
    except httpx.HTTPError:
        return False


def prepare(stack: Stack, sessionmaker, corpora: int) -> tuple[str, str]:
    """A team with `corpora` corpora and version 1 of a small tokenizer; its key and the tokenizer's name."""
    _team, key = make_team(sessionmaker)
    text = (services.FIXTURES / "fortunes" / "deu_Latn.txt").read_bytes()
    with stack.client(key) as client:
        ids = [upload(client, f"corpus-{n}", text[n * 100:] + f"\n{n}\n".encode()) for n in range(corpora)]
        job_id = submit(client, "load-bpe", ids[0], VERSION_SPEC)
        job = until(lambda: client.get(f"/v1/jobs/{job_id}").json(), lambda job: job["status"] not in UNFINISHED, 300)
        assert job["status"] == "succeeded", job
    return key, "load-bpe"


class Training:
    """Another team's 32k jobs on an `mb` MB corpus, one always running while routes are measured."""

    def __init__(self, stack: Stack, sessionmaker, mb: float, workdir: Path) -> None:
        _team, self.key = make_team(sessionmaker)
        self.stack = stack
        corpus = workdir / "training.txt"
        corpus_file(corpus, int(mb * MB))
        with stack.client(self.key, timeout=600) as client:
            self.corpus_id = upload(client, "training", corpus.read_bytes())
        corpus.unlink()
        self.job_id: str | None = None
        self.jobs = 0

    def ensure_running(self) -> None:
        """Submit the next job if the last one ended, and wait until it runs."""
        with self.stack.client(self.key) as client:
            if self.job_id is None or client.get(f"/v1/jobs/{self.job_id}").json()["status"] not in UNFINISHED:
                self.job_id = submit(client, f"trained-meanwhile-{self.jobs}", self.corpus_id, TRAINING_SPEC)
                self.jobs += 1
            assert eventually(lambda: client.get(f"/v1/jobs/{self.job_id}").json()["status"] == "running", 120)

    def status(self) -> str:
        with self.stack.client(self.key) as client:
            return client.get(f"/v1/jobs/{self.job_id}").json()["status"]


def measure(args, stack: Stack, bare: str, key: str, tokenizer: str, training: Training | None) -> list[dict]:
    headers = {"Authorization": f"Bearer {key}"}
    rows = []
    for round_number in range(1, args.rounds + 1):
        if training:
            training.ensure_running()
        bare_outcome = http_load.run(f"{bare}/v1/corpora", headers, args.clients, args.seconds)
        rows.append({"round": round_number, "route": "bare GET /v1/corpora", **bare_outcome.summary()})
        print(_line(rows[-1]), flush=True)
        for name, path in routes(tokenizer).items():
            with stack.client(key) as client:
                size = len(client.get(path).content)
            if training:
                training.ensure_running()
            with HealthProbe(stack.base) as probe:
                outcome = http_load.run(f"{stack.base}{path}", headers, args.clients, args.seconds)
            row = {"round": round_number, "route": name, **outcome.summary(), **probe.summary(), "bytes": size,
                   "ratio": round(outcome.per_second / max(bare_outcome.per_second, 1e-9), 2)}
            if training:
                row["training"] = training.status()  # still running as the route's load ended
            rows.append(row)
            print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
    return (f"round {row['round']} {row['route']:<40} {row['requests_per_second']:>7.1f}/s {ratio:>6} "
            f"{row.get('bytes', 0):>7} B p50 {row['p50_ms']:>7.1f} ms p99 {row['p99_ms']:>7.1f} ms not 2xx {row['not_2xx']}"
            + (f" healthz max {row['healthz_max_ms']:.0f} ms, {row['healthz_failures']} failed" if "healthz_max_ms" in row else "")
            + (f" (training: {row['training']})" if "training" in row else ""))


def table(rows: list[dict], clients: int, seconds: float) -> str:
    """Markdown: a line per route and round."""
    lines = [f"{clients} clients, {seconds:g} s a route a round, load average {os.getloadavg()[0]:.2f}", "",
             "| round | route | requests/s | × bare | p50 ms | p99 ms | not 2xx | /healthz meanwhile: max ms, failed |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for row in rows:
        ratio = f"{row['ratio']:.2f}" if "ratio" in row else "—"
        lines.append(f"| {row['round']} | {row['route']} | {row['requests_per_second']:.0f} | {ratio} | "
                     f"{row['p50_ms']:.0f} | {row['p99_ms']:.0f} | {row['not_2xx']} | {_health(row)} |")
    return "\n".join(lines)


def _health(row: dict) -> str:
    return f"{row['healthz_max_ms']:.0f}, {row['healthz_failures']}" if "healthz_max_ms" in row else "—"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--corpora", type=int, default=20, help="corpora of the team whose routes are read")
    parser.add_argument("--training", action="store_true", help="a 32k job trains meanwhile")
    parser.add_argument("--training-mb", type=float, default=100)
    parser.add_argument("--json", type=Path, default=services.REPO / "build" / "metadata_load.json")
    args = parser.parse_args(argv)
    logs = Path(tempfile.mkdtemp(prefix="metadata-load-"))
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; logs in {logs}", flush=True)
    with services.run_settings() as settings:
        env = {**process_env(settings, REDIS_DB), "TOKENMILL_HOME": str(logs),
               "TOKENMILL_JOB_SOFT_TIME_LIMIT": "3000", "TOKENMILL_JOB_HARD_TIME_LIMIT": "3600"}
        stack = Stack(env, logs)
        engine = make_engine(settings.database_url)
        bare = None
        try:
            for name in ("worker", "beat", "api"):
                stack.start(name)
            bare, bare_base = start_bare(env, logs)
            key, tokenizer = prepare(stack, make_sessionmaker(engine), args.corpora)
            training = Training(stack, make_sessionmaker(engine), args.training_mb, logs) if args.training else None
            started = time.monotonic()
            rows = measure(args, stack, bare_base, key, tokenizer, training)
            print(f"measured in {time.monotonic() - started:.0f} s", flush=True)
        finally:
            if bare is not None:
                bare.terminate()
                bare.wait(30)
            for name in list(stack.processes):
                stack.stop(name)
            engine.dispose()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(rows, indent=2))
    print("\n" + table(rows, args.clients, args.seconds) + f"\n\n(every figure in {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
