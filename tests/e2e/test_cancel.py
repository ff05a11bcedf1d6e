"""Cancelling a running job: it ends cancelled, no version appears, and its work stops within
seconds wherever it is (here: counting processes stuck in a backtracking regex, which never
report progress), so the worker's slot starts the next job."""

import time

import psutil

from tests.e2e.test_walking_skeleton import multilingual_corpus, submit, wait_for_job
from tests.stack import unique
from tests.waiting import until

# Passes the submission probe (its runs of one character end fast), but backtracks
# exponentially on "a1a1…a1 !" in Python's regex, which `library: tokenmill` counts with.
STUCK = {"library": "tokenmill", "vocab_size": 300, "pre_tokenizer_regex": r"(?:\p{L}\d|\p{L}\d)+!"}
STOPPED_WITHIN = 30  # seconds: the claim is read every second, then 3 s of grace


def counting_processes() -> list[psutil.Process]:
    """The counting processes of `library: tokenmill` jobs among this test run's descendants."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:  # a child that answered at once (no texts came its way) may be a zombie until its parent reads it
            if process.status() != psutil.STATUS_ZOMBIE and "with_tokenmill import serve" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            pass  # ended meanwhile
    return found


def test_a_cancelled_job_stops_within_seconds_and_leaves_no_version(http):
    stuck = http.post("/v1/corpora", data={"name": "stuck", "domain": "code", "language": "mul"},
                      files={"file": ("stuck.txt", (b"a1" * 30 + b" !\n") * 20)}).json()
    name = unique("cancel")
    response = http.post("/v1/jobs", json={"tokenizer": name, "spec": STUCK, "train_corpora": [stuck["id"]],
                                           "eval_corpora": [stuck["id"]]})
    assert response.status_code == 202, response.text
    job = response.json()
    counters = until(counting_processes, bool, 120, every=0.2)
    job_process = counters[0].parent()  # the worker's child running the job
    cancelled = http.post(f"/v1/jobs/{job['id']}/cancel").json()
    started = time.monotonic()
    assert cancelled["status"] == "cancelled"
    until(lambda: [p for p in (job_process, *counters) if p.is_running() and p.status() != psutil.STATUS_ZOMBIE],
          lambda left: not left, STOPPED_WITHIN, every=0.2)
    print(f"cancelled job's processes gone {time.monotonic() - started:.1f} s after the cancel")

    # The worker runs one job at a time: its slot is free again.
    corpus = http.post("/v1/corpora", data={"name": "small", "domain": "news", "language": "mul"},
                       files={"file": ("small.txt", multilingual_corpus(40))}).json()
    later = wait_for_job(http, submit(http, unique("after"), corpus["id"], vocab_size=400).json()["id"], 120)
    assert later["status"] == "succeeded"
    final = http.get(f"/v1/jobs/{job['id']}").json()
    assert (final["status"], final["version"]) == ("cancelled", None)
    assert http.get(f"/v1/tokenizers/{name}/versions").status_code == 404
    assert http.post(f"/v1/jobs/{later['id']}/cancel").status_code == 409
