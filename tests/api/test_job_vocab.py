"""A job says the vocabulary it asked for and, once it succeeded, the one its version reached, and why it fell short;
`tokenmill job show` warns on stderr when it did (no worker here: the success is written to the database)."""

import contextlib
import io
import json
import uuid

import pytest
from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tokenmill import client
from tokenmill.cli import main
from tokenmill.db import transaction
from tokenmill.models import Status, TokenizerVersion, TrainingJob


@pytest.fixture
def corpus_id(api):
    response = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "eng_Latn"},
                        files={"file": ("c.txt", io.BytesIO(b"a little text\nand a little more\n"))})
    return response.json()["id"]


def succeeded(sessionmaker, job_id: str, reached: int) -> None:
    """What the pipeline leaves when a job succeeds: its version, and the job pointing at it."""
    with transaction(sessionmaker) as session:
        job = session.get(TrainingJob, uuid.UUID(job_id))
        session.add(TokenizerVersion(team_id=job.team_id, name=job.tokenizer, version=1, job_id=job.id, spec=job.spec,
                                     vocab_size=reached, files=[], lineage={}, train_seconds=1.0, peak_memory_bytes=1))
        job.status, job.stage, job.progress, job.version = Status.SUCCEEDED, "done", 1.0, 1


def submit(api, corpus_id: str, tokenizer: str, vocab_size: int) -> dict:
    response = api.post("/v1/jobs", json={"tokenizer": tokenizer, "spec": {"vocab_size": vocab_size},
                                          "train_corpora": [corpus_id]})
    assert response.status_code == 202, response.text
    return response.json()


def test_a_job_says_what_it_asked_for_and_what_its_version_reached(api, corpus_id, sessionmaker):
    queued = submit(api, corpus_id, "short", 8000)
    assert (queued["requested_vocab_size"], queued["reached_vocab_size"], queued["notes"]) == (8000, None, [])
    succeeded(sessionmaker, queued["id"], 5382)

    job = api.get(f"/v1/jobs/{queued['id']}").json()
    assert (job["requested_vocab_size"], job["reached_vocab_size"]) == (8000, 5382)
    assert len(job["notes"]) == 1
    assert job["notes"][0].startswith("the vocabulary reached 5382 of the 8000 tokens asked for: the training corpora "
                                      "hold too little")
    version = api.get("/v1/tokenizers/short/versions/1").json()
    assert job["notes"] == version["notes"]  # one sentence, said the same way by both
    listed = {item["id"]: item for item in api.get("/v1/jobs").json()["items"]}
    assert listed[job["id"]] == job

    full = submit(api, corpus_id, "full", 1000)
    succeeded(sessionmaker, full["id"], 1000)
    full = api.get(f"/v1/jobs/{full['id']}").json()
    assert (full["requested_vocab_size"], full["reached_vocab_size"], full["notes"]) == (1000, 1000, [])


def test_the_jobs_page_shows_the_shortfall(app_client, api, corpus_id, sessionmaker):
    job = submit(api, corpus_id, "paged", 8000)
    succeeded(sessionmaker, job["id"], 5382)
    note = api.get(f"/v1/jobs/{job['id']}").json()["notes"][0]
    browser = TestClient(app_client.app)
    sign_in(browser, api.headers["Authorization"].removeprefix("Bearer "))
    page = browser.get("/jobs").text
    row = page[page.index(f'id="job-{job["id"]}"'):]
    row = row[:row.index("</tr>")]
    assert "5,382 of 8,000 tokens" in row
    assert note in row


def run_cli(api, monkeypatch, capsys, *argv: str) -> tuple[int, str, str]:
    """The user CLI's command, talking to the in-process API as its client."""
    monkeypatch.setattr(client, "_client", lambda args: contextlib.nullcontext(api))
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    out, err = capsys.readouterr()
    return exited.value.code, out, err


def test_job_show_warns_on_stderr_when_the_vocabulary_fell_short(api, corpus_id, sessionmaker, monkeypatch, capsys):
    short, full = submit(api, corpus_id, "cli-short", 8000), submit(api, corpus_id, "cli-full", 1000)
    succeeded(sessionmaker, short["id"], 5382)
    succeeded(sessionmaker, full["id"], 1000)

    code, out, err = run_cli(api, monkeypatch, capsys, "job", "show", short["id"])
    assert code == 0 and json.loads(out)["reached_vocab_size"] == 5382
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: the vocabulary reached 5382 of the 8000 tokens asked for")

    code, out, err = run_cli(api, monkeypatch, capsys, "job", "show", full["id"])
    assert code == 0 and json.loads(out)["reached_vocab_size"] == 1000 and err == ""
