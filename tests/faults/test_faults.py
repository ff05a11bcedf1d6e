"""Each fault ends every job within minutes (here: seconds, with short heartbeats) as retried
or failed with a reason a person can act on, and leaves no orphan object and no orphan row."""

import contextlib
import signal
import time
import uuid

import httpx
import psutil
import pytest
from sqlalchemy import func, select

from tests.conftest import make_team
from tests.faults.conftest import elapsed, kill_tree, record, unique
from tests.services import CORPORA
from tests.waiting import UNFINISHED, until
from tokenmill.models import Corpus, CountPart, EvaluationRun, MeasurePart, TokenizerVersion

BIBLE = CORPORA / "bible" / "eng_Latn.txt"
# What a job trained on a large corpus is evaluated on: 238 KB, one part, so the test waits for
# the fault and the retry, not for the version's evaluation on 26 MB (and four references).
SMALL = CORPORA / "legal" / "eng_Latn.txt"
SMALL_SPEC = {"vocab_size": 8000}


def upload(http, path=BIBLE, name="bible") -> str:
    with path.open("rb") as handle:
        response = http.post("/v1/corpora", files={"file": handle},
                             data={"name": unique(name), "domain": "religion", "language": "eng_Latn"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def submit(http, corpus_id: str, spec=None, evaluated_on: str | None = None) -> str:
    response = http.post("/v1/jobs", json={"tokenizer": unique("fault"), "spec": spec or SMALL_SPEC,
                                           "train_corpora": [corpus_id], "eval_corpora": [evaluated_on or corpus_id]})
    assert response.status_code == 202, response.text
    return response.json()["id"]


def wait_for_stage(http, path: str, done, timeout: float = 120) -> dict:
    return until(lambda: http.get(path).json(), done, timeout, every=0.2)


def ended(http, path: str, timeout: float = 180) -> dict:
    return until(lambda: http.get(path).json(), lambda item: item["status"] not in UNFINISHED, timeout)


def no_orphans(sessionmaker, store, team_id) -> None:
    """The team's objects are exactly those its rows name (failed jobs' files are gone)."""
    def objects_and_rows():
        with sessionmaker() as session:
            named = set(session.scalars(select(Corpus.storage_key).where(Corpus.team_id == team_id)))
            for files in session.scalars(select(TokenizerVersion.files).where(TokenizerVersion.team_id == team_id)):
                named |= {entry["key"] for entry in files}
        stored = {o.key for o in store.list_objects(f"corpora/{team_id}/")}
        stored |= {o.key for o in store.list_objects(f"versions/{team_id}/")}
        return stored, named

    until(objects_and_rows, lambda pair: pair[0] == pair[1], 60)


def training(job: dict) -> bool:
    # The job is in the library: reading the corpus and counting, then learning merges (progress
    # is written at most once a second, so a read shorter than that shows only its start).
    return job["status"] not in UNFINISHED or job["stage"] == "training"


def read(job: dict) -> bool:
    # The corpus is read: the library learns merges, and the next S3 call writes the files.
    return job["status"] not in UNFINISHED or job["progress"] >= 0.5


@pytest.fixture
def team_id(team_key):
    return team_key[0].id


def test_worker_killed_mid_training_is_retried_and_succeeds(fault_stack, faults_http, sessionmaker, store, team_id):
    job_id = submit(faults_http, upload(faults_http))
    wait_for_stage(faults_http, f"/v1/jobs/{job_id}", training)
    started = time.monotonic()
    assert fault_stack.kill_worker_children() >= 1
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("worker child kill -9 mid-training", f"{job['status']} after {job['attempts']} attempts", elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    no_orphans(sessionmaker, store, team_id)


def test_workers_killed_while_counting_parts_retry_the_job_and_leave_no_part(fault_stack, faults_http, sessionmaker,
                                                                           store, team_id, tmp_path):
    corpus = tmp_path / "manpages.txt"  # 26 MB: 13 parts of 2 MiB, counted by both worker processes
    corpus.write_bytes(b"".join((CORPORA / "manpages" / f"{name}.txt").read_bytes()
                                for name in ("deu_Latn", "fra_Latn", "rus_Cyrl", "eng_Latn")))
    small, corpus_id = upload(faults_http, SMALL, "legal"), upload(faults_http, corpus, "manpages")
    job_id = submit(faults_http, corpus_id, {"library": "rustbpe", "vocab_size": 4000, "counting": "distributed"}, small)
    wait_for_stage(faults_http, f"/v1/jobs/{job_id}",
                   lambda job: job["status"] not in UNFINISHED or job["stage"] == "counting")
    started = time.monotonic()
    assert fault_stack.kill_worker_children() >= 1  # the coordinator and its helper, mid-part
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("worker children kill -9 while counting parts (distributed counting)",
           f"{job['status']} after {job['attempts']} attempts", elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    no_orphans(sessionmaker, store, team_id)  # the spilled counts are gone with the parts
    with sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(CountPart).where(CountPart.owner_id == job_id)) == 0


def counting_processes(stack) -> list[psutil.Process]:
    """The processes counting texts for a `library: tokenmill` job of this stack's workers (orphans
    included: they keep its environment), not of other test runs on the machine."""
    database = stack.worker_env["TOKENMILL_DATABASE_URL"]
    found = []
    for process in psutil.process_iter(["cmdline"]):
        try:
            if ("with_tokenmill import serve" in " ".join(process.info["cmdline"] or [])
                    and process.environ().get("TOKENMILL_DATABASE_URL") == database):
                found.append(process)
        except psutil.Error:
            pass  # ended meanwhile, or not ours to read
    return found


def test_a_tokenmill_job_whose_process_is_killed_leaves_no_counting_process_and_succeeds(
        fault_stack, faults_http, sessionmaker, store, team_id, tmp_path):
    corpus = tmp_path / "manpages.txt"  # 26 MB: seconds of counting on both cores
    corpus.write_bytes(b"".join((CORPORA / "manpages" / f"{name}.txt").read_bytes()
                                for name in ("deu_Latn", "fra_Latn", "rus_Cyrl", "eng_Latn")))
    # A normalizing spec is counted in children (a bare preset, on threads of the job's process).
    small = upload(faults_http, SMALL, "legal")
    job_id = submit(faults_http, upload(faults_http, corpus, "manpages"),
                    {"library": "tokenmill", "vocab_size": 4000, "normalization": "nfc"}, small)
    until(lambda: counting_processes(fault_stack), bool, 120, every=0.1)
    started = time.monotonic()
    # Only the job's own process (the pool's child): its counting children are left to notice.
    killed = psutil.Process(fault_stack.worker.pid).children()
    for process in killed:
        process.send_signal(signal.SIGKILL)
    assert killed
    until(lambda: counting_processes(fault_stack), lambda left: not left, 60)  # no orphan: each ends once its parent is gone
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("a tokenmill job's process kill -9 while counting", f"{job['status']} after {job['attempts']} attempts, "
           "no counting process left", elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    assert not counting_processes(fault_stack)
    no_orphans(sessionmaker, store, team_id)


def test_worker_killed_mid_evaluation_is_retried_and_succeeds(fault_stack, faults_http, sessionmaker, store, team_id):
    corpus_id = upload(faults_http)
    response = faults_http.post("/v1/evaluations", json={"reference": "o200k_base", "corpora": [corpus_id]})
    assert response.status_code == 202, response.text
    path = f"/v1/evaluations/{response.json()['id']}"
    wait_for_stage(faults_http, path, lambda run: run["status"] == "running")
    started = time.monotonic()
    fault_stack.kill_worker_children()
    run = ended(faults_http, path)
    record("worker child kill -9 mid-evaluation", run["status"], elapsed(started))
    assert run["status"] == "succeeded" and len(run["results"]) == 1, run
    with sessionmaker() as session:  # the kill landed: the run was taken over, not finished first
        assert session.get_one(EvaluationRun, uuid.UUID(run["id"])).attempts == 2
    no_orphans(sessionmaker, store, team_id)


def test_workers_killed_while_measuring_parts_retry_the_run_and_leave_no_part(fault_stack, faults_http, sessionmaker,
                                                                             store, team_id, tmp_path):
    corpus = tmp_path / "manpages.txt"  # 26 MB, measured whole: 13 parts of 2 MiB, measured by both worker processes
    corpus.write_bytes(b"".join((CORPORA / "manpages" / f"{name}.txt").read_bytes()
                                for name in ("deu_Latn", "fra_Latn", "rus_Cyrl", "eng_Latn")))
    corpus_id = upload(faults_http, corpus, "manpages")
    response = faults_http.post("/v1/evaluations", json={"reference": "cl100k_base", "corpora": [corpus_id]})
    assert response.status_code == 202, response.text
    run_id = uuid.UUID(response.json()["id"])

    def parts_measured() -> int:
        with sessionmaker() as session:
            return session.scalar(select(func.count()).select_from(MeasurePart).where(
                MeasurePart.owner_id == run_id, MeasurePart.status == "done")) or 0

    until(parts_measured, lambda done: done >= 1, 120)
    started = time.monotonic()
    assert fault_stack.kill_worker_children() >= 1  # the coordinator and its helper, mid-part
    run = ended(faults_http, f"/v1/evaluations/{run_id}")
    record("worker children kill -9 while measuring parts (a corpus measured whole)", run["status"], elapsed(started))
    assert run["status"] == "succeeded" and len(run["results"]) == 1, run
    with sessionmaker() as session:
        assert session.get_one(EvaluationRun, run_id).attempts == 2
        assert session.scalar(select(func.count()).select_from(MeasurePart).where(MeasurePart.owner_id == run_id)) == 0
    # The killed attempt's recipe and sums are gone: deleted by the next attempt's end or by reconciliation.
    until(lambda: list(store.list_objects(f"evaluations/{run_id}/")), lambda left: not left, 60)


def test_database_unreachable_mid_job_is_retried_and_succeeds(fault_stack, faults_http, sessionmaker, store, team_id):
    job_id = submit(faults_http, upload(faults_http))
    wait_for_stage(faults_http, f"/v1/jobs/{job_id}", training)
    started = time.monotonic()
    fault_stack.database.cut()
    time.sleep(10)
    fault_stack.database.restore()
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("worker's PostgreSQL unreachable for 10 s mid-training", f"{job['status']} after {job['attempts']} attempts",
           elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] >= 2, job
    no_orphans(sessionmaker, store, team_id)


def test_store_unreachable_at_export_is_retried_and_succeeds(fault_stack, faults_http, sessionmaker, store, team_id):
    # A larger vocabulary: its merges, after the corpus is read, outlast the test's polling.
    job_id = submit(faults_http, upload(faults_http), {"vocab_size": 30000})
    wait_for_stage(faults_http, f"/v1/jobs/{job_id}", read)
    started = time.monotonic()
    fault_stack.s3.cut()  # the corpus is read: the next S3 call is writing the version's files
    wait_for_stage(faults_http, f"/v1/jobs/{job_id}", lambda job: job["stage"] == "retrying" or job["attempts"] > 1, 60)
    fault_stack.s3.restore()  # back for the next attempt, due 2 s later (TOKENMILL_RETRY_SECONDS in FAST)
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("S3 unreachable at export until the job is queued again", f"{job['status']} after {job['attempts']} attempts",
           elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] >= 2, job
    no_orphans(sessionmaker, store, team_id)


def test_broker_unreachable_at_submission_is_sent_later(fault_stack, faults_http, sessionmaker, store, team_id):
    corpus_id = upload(faults_http, CORPORA / "legal" / sorted(p.name for p in (CORPORA / "legal").iterdir()
                                                               if p.suffix == ".txt")[0])
    fault_stack.broker.cut()
    started = time.monotonic()
    try:
        job_id = submit(faults_http, corpus_id, {"vocab_size": 500})  # 202: the row is committed, the send failed
    finally:
        fault_stack.broker.restore()
    job = ended(faults_http, f"/v1/jobs/{job_id}")
    record("broker unreachable at submission", f"202, then {job['status']} (sent by the sweeper)", elapsed(started))
    assert job["status"] == "succeeded", job
    no_orphans(sessionmaker, store, team_id)


def test_corpus_deleted_while_the_store_is_away_leaves_no_object(fault_stack, faults_http, sessionmaker, store, team_id):
    corpus_id = upload(faults_http)
    fault_stack.s3.cut()
    started = time.monotonic()
    try:
        assert faults_http.delete(f"/v1/corpora/{corpus_id}").status_code == 204
    finally:
        fault_stack.s3.restore()
    assert faults_http.get(f"/v1/corpora/{corpus_id}").status_code == 404
    no_orphans(sessionmaker, store, team_id)  # the sweeper's reconciliation removed the object
    record("corpus DELETE while S3 is unreachable", "204; object removed by reconciliation", elapsed(started))


def test_api_database_unreachable_answers_503_problem(fault_stack, faults_http):
    fault_stack.api_database.cut()
    started = time.monotonic()
    try:
        response = faults_http.get("/v1/corpora")
    finally:
        fault_stack.api_database.restore()
    record("API's PostgreSQL unreachable", f"{response.status_code} {response.headers.get('content-type')}",
           elapsed(started))
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert "Retry-After" in response.headers
    assert "127.0.0.1" not in response.text and "postgres" not in response.text.lower()
    until(lambda: faults_http.get("/v1/corpora").status_code, lambda status: status == 200, 30)


# A job that never ends: counting processes stuck in a backtracking regex (see tests/e2e/test_cancel.py).
ENDLESS = {"library": "tokenmill", "vocab_size": 300, "pre_tokenizer_regex": r"(?:\p{L}\d|\p{L}\d)+!"}


def test_a_dead_workers_job_is_taken_over_while_every_slot_holds_long_work(fault_stack, faults_http, sessionmaker,
                                                                          store, team_id, tmp_path):
    # Another team's two endless jobs hold both slots of the stack's worker (reniced: they spin).
    _, key = make_team(sessionmaker)
    endless = tmp_path / "endless.txt"
    endless.write_bytes((b"a1" * 30 + b" !\n") * 20)
    with httpx.Client(base_url=fault_stack.base, headers={"Authorization": f"Bearer {key}"}, timeout=60) as busy:
        corpus_id = upload(busy, endless, "endless")
        holders = [submit(busy, corpus_id, ENDLESS) for _ in range(2)]
        until(lambda: [busy.get(f"/v1/jobs/{job}").json()["status"] for job in holders],
              lambda statuses: statuses == ["running", "running"], 120)
        for process in psutil.Process(fault_stack.worker.pid).children(recursive=True):
            with contextlib.suppress(psutil.NoSuchProcess):  # a helper process that ended since the listing
                process.nice(19)
        # A second worker (a second machine) takes the next job, and is lost with it.
        second = fault_stack.start_worker()
        job_id = submit(faults_http, upload(faults_http), SMALL_SPEC)
        wait_for_stage(faults_http, f"/v1/jobs/{job_id}", training)
        started = time.monotonic()
        kill_tree(second.pid)
        # The upkeep runs in its own process: the silent job is queued again though no slot is free.
        job = until(lambda: faults_http.get(f"/v1/jobs/{job_id}").json(), lambda job: job["status"] != "running", 60)
        taken_over = elapsed(started)
        assert (job["status"], job["attempts"], job["stage"]) == ("queued", 1, "retrying"), job
        assert [busy.get(f"/v1/jobs/{job}").json()["status"] for job in holders] == ["running", "running"]
        assert busy.post(f"/v1/jobs/{holders[0]}/cancel").status_code == 200  # a slot comes free within seconds
        job = ended(faults_http, f"/v1/jobs/{job_id}")
        busy.post(f"/v1/jobs/{holders[1]}/cancel")
    record("second worker kill -9 (machine lost) mid-training while every other slot holds a 3-hour job",
           f"queued again after {taken_over:.1f} s; {job['status']} after {job['attempts']} attempts once a slot freed",
           elapsed(started))
    assert job["status"] == "succeeded" and job["attempts"] == 2, job
    no_orphans(sessionmaker, store, team_id)
