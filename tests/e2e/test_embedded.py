"""`tokenmill up`: SQLite, a local folder store and the filesystem transport, with a real worker."""

import os
import signal
import subprocess
import sys
from contextlib import contextmanager

import httpx
import psutil

from tests.services import free_port, wait_for
from tests.waiting import finished, until


@contextmanager
def embedded(tmp_path):
    """`tokenmill up` in a session of its own, once its API answers: (the process, its URL)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENMILL_")}
    process = subprocess.Popen([sys.executable, "-m", "tokenmill", "up", "--home", str(tmp_path / "home"),
                                "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "embedded API", 60)
        yield process, base
    finally:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(30)
        except ProcessLookupError:
            pass  # it has stopped already, with its whole group
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)


def test_embedded_mode_serves_seeds_and_trains(tmp_path):
    with embedded(tmp_path) as (_, base):
        key = (tmp_path / "home" / "api-key").read_text().strip()
        http = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        corpora = http.get("/v1/corpora").json()["items"]
        assert {c["name"] for c in corpora} == {"demo-bible-en", "demo-bible-es"}
        assert all(c["statistics"]["distinct_words"] > 1000 for c in corpora)
        job = http.post("/v1/jobs", json={"tokenizer": "demo", "spec": {"vocab_size": 600},
                                          "train_corpora": [corpora[0]["id"]]}).json()
        job = finished(http, f"/v1/jobs/{job['id']}", timeout=120)
        assert job["status"] == "succeeded", job["error"]
        assert http.get("/v1/tokenizers/demo/versions/1/files/tokenizer.json").status_code == 200
        english = next(c for c in corpora if c["language"] == "eng_Latn")
        evaluations = http.get("/v1/tokenizers/demo/versions/1/evaluations").json()["items"]
        assert next(e for e in evaluations if e["corpus_id"] == english["id"])["metrics"]["premium"] == 1.0


def test_a_signal_to_tokenmill_up_alone_stops_its_api_worker_and_upkeep(tmp_path):
    # A kill (or a closed terminal) reaches `tokenmill up` only, not its process group as
    # Ctrl-C does: its API, worker and upkeep must not be left running without it.
    with embedded(tmp_path) as (process, _):
        started = psutil.Process(process.pid).children(recursive=True)
        commands = [" ".join(p.cmdline()) for p in started]
        assert any("workers.upkeep" in c for c in commands) and any("workers.app worker" in c for c in commands)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        assert until(lambda: [p.pid for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
                     lambda left: not left, 30) == []
