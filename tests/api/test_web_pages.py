"""Issue 23's pages through the app: a job's page, a tokenizer's page, the dashboard's own 404 pages, a
parity version that offers to train its plain twin, and the new-job form (folded fields, corpora by
parallel group, what the job will do) without script."""

import io
import re
import uuid

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.db import transaction
from tokenmill.models import TokenizerVersion, TrainingJob
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec

LINES = {lang: flores_lines(60, languages=(lang,)) for lang in ("eng_Latn", "spa_Latn")}


def upload(client, key: str, name: str, language: str, text: str, group: str | None = None) -> str:
    fields = {"name": name, "domain": "news", "language": language, **({"parallel_group": group} if group else {})}
    response = client.post("/v1/corpora", data=fields, files={"file": (f"{name}.txt", io.BytesIO(text.encode()))},
                           headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def version(sessionmaker, store, team, name: str, corpora: list[str], **spec) -> TokenizerVersion:
    resolved = resolve_spec({"vocab_size": 300, **spec})
    tokenizer = with_tokenizers.train(resolved, LINES["eng_Latn"] + LINES["spa_Latn"])
    files, _ = artifact_files(resolved, tokenizer)
    row = add_version(sessionmaker, store, team, name, resolved, files, tokenizer.get_vocab_size())
    with transaction(sessionmaker) as session:  # trained on the group, as the pipeline's lineage says
        lineage = {**row.lineage, "corpora": [{"id": c, "name": c, "domain": "news", "language": "–", "sha256": "",
                                               "bytes": 0, "lines": 60} for c in corpora]}
        session.execute(update(TokenizerVersion).where(TokenizerVersion.id == row.id).values(lineage=lineage))
    return row


@pytest.fixture(scope="module")
def site(app_client, sessionmaker, store):
    """A signed-in client of a team with a parallel group, a parity version without a plain twin, and jobs."""
    team, key = make_team(sessionmaker)
    client = TestClient(app_client.app, follow_redirects=False)
    corpora = [upload(client, key, f"flores-{lang}", lang, "\n".join(lines), "flores") for lang, lines in LINES.items()]
    alone = upload(client, key, "alone", "eng_Latn", "words and more words\n")
    parity = version(sessionmaker, store, team, "fair", corpora, parity=True)
    with transaction(sessionmaker) as session:
        jobs = {status: TrainingJob(team_id=team.id, tokenizer="fair", spec={"vocab_size": 300, "parity": status == "running"},
                                    train_corpus_ids=corpora, eval_corpus_ids=[alone], status=status, stage=stage,
                                    progress=progress, attempts=attempts, error=error)
                for status, stage, progress, attempts, error in (
                    ("running", "training", 0.3, 1, None),
                    ("failed", "failed", 0.4, 2, "training failed: the corpus is empty\n  hint: check the text_field"))}
        session.add_all(jobs.values())
    token = sign_in(client, key)
    return {"client": client, "key": key, "token": token, "corpora": corpora, "alone": alone, "parity": parity,
            "jobs": {status: str(job.id) for status, job in jobs.items()}}


@pytest.mark.parametrize("path", ["/jobs/{uuid}", "/jobs/not-an-id", "/jobs/a/b/c", "/tokenizers/nope",
                                  "/tokenizers/fair/versions/9", "/tokenizers/nope/versions/1", "/corpora/{uuid}",
                                  "/corpora/not-an-id", "/tokenizers/fair/versions/1/nothing"])
def test_unknown_things_are_404_pages_of_the_dashboard(site, path):
    response = site["client"].get(path.format(uuid=uuid.uuid4()))
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert "404 · Not found" in response.text
    assert 'action="/signout"' in response.text  # inside the dashboard: its header, signed in


def test_the_pages_script_and_the_api_still_get_problem_json(site):
    client = site["client"]
    status = client.get(f"/jobs/{uuid.uuid4()}/status", headers={"Accept": "application/json"})
    assert status.status_code == 404 and status.headers["content-type"] == "application/problem+json"
    api = client.get(f"/v1/jobs/{uuid.uuid4()}", headers={"Authorization": f"Bearer {site['key']}"})
    assert api.status_code == 404 and api.headers["content-type"] == "application/problem+json"


def test_a_job_has_a_page(site):
    client, jobs = site["client"], site["jobs"]
    failed = client.get(f"/jobs/{jobs['failed']}").text
    assert "hint: check the text_field" in failed and 'id="job-attempts">2 of at most 3' in failed
    assert "flores-eng_Latn" in failed and "alone" in failed  # its corpora, trained on and evaluated on
    assert 'data-job="' not in failed  # finished: nothing to follow
    running = client.get(f"/jobs/{jobs['running']}").text
    assert f'data-job="{jobs["running"]}"' in running and "parity-aware" in running  # followed live; labelled
    assert '<input type="hidden" name="back" value="job">' in running
    cancelled = client.post(f"/jobs/{jobs['running']}/cancel", data={"csrf_token": site["token"], "back": "job"})
    assert cancelled.status_code == 303 and cancelled.headers["location"] == f"/jobs/{jobs['running']}"
    listing = client.get("/jobs").text
    assert f'<a href="/jobs/{jobs["failed"]}">fair</a>' in listing  # the jobs page links each job's page


def test_a_tokenizer_has_a_page(site):
    client = site["client"]
    page = client.get("/tokenizers/fair")
    assert page.status_code == 200 and 'id="spec-compare"' in page.text and "v1" in page.text
    assert client.get("/tokenizers/fair/versions").headers["location"] == "/tokenizers/fair"


def test_a_parity_version_without_its_plain_twin_offers_to_train_it(site):
    client = site["client"]
    page = client.get("/tokenizers/fair/versions/1").text
    assert 'id="parity-tag">parity-aware' in page
    link = re.search(r'<a class="button" href="([^"]+)" id="train-twin">', page).group(1).replace("&amp;", "&")
    assert link == "/jobs/new?like=fair%401&parity=false&tokenizer=fair-plain"
    form = client.get(link).text
    assert 'id="tokenizer" name="tokenizer" value="fair-plain"' in form
    assert 'id="spec-parity" name="spec.parity" value="true" checked' not in form
    for corpus_id in site["corpora"]:
        assert f'id="train_corpora-{corpus_id}" name="train_corpora" value="{corpus_id}" checked' in form
    assert f'value="{site["alone"]}" checked' not in form
    assert 'data-advice="parity">These corpora are the parallel group flores in 2 languages' in form


def test_the_form_folds_advanced_fields_and_groups_corpora(site):
    form = site["client"].get("/jobs/new").text
    advanced = form.split('<details class="advanced" id="advanced">')[1].split("</details>")[0]
    assert 'id="spec-min_frequency"' in advanced and 'id="spec-vocab_size"' not in advanced
    assert 'id="spec-vocab_size"' in form.split('<details class="advanced"')[0]
    group = form.split('data-group="flores"')[1].split('class="corpus-group"')[0]
    assert "2 languages, lines aligned" in group and "flores-spa_Latn" in group and "alone" not in group


def test_checking_the_choices_starts_nothing(site, sessionmaker):
    client = site["client"]
    fields = {"csrf_token": site["token"], "tokenizer": "checked", "spec.vocab_size": "32000",
              "train_corpora": site["corpora"], "idempotency_key": "check-1", "check": "1"}
    page = client.post("/jobs/new", data=fields)
    assert page.status_code == 200 and 'data-advice="vocabulary">A vocabulary of 32,000' in page.text
    assert 'value="32000"' in page.text  # the form as it was
    jobs = client.get("/v1/jobs", headers={"Authorization": f"Bearer {site['key']}"}).json()["items"]
    assert all(job["tokenizer"] != "checked" for job in jobs)
    folded = client.post("/jobs/new", data={**fields, "spec.min_frequency": "-3", "check": ""})
    assert folded.status_code == 422 and '<details class="advanced" id="advanced" open>' in folded.text


def test_the_script_asks_for_advice_with_the_forms_token(site):
    client = site["client"]
    fields = {"tokenizer": "x", "spec.vocab_size": "500", "train_corpora": site["corpora"]}
    assert client.post("/jobs/new/advice", data=fields).status_code == 403
    answer = client.post("/jobs/new/advice", data={**fields, "csrf_token": site["token"]},
                         headers={"Accept": "application/json"})
    assert answer.status_code == 200 and 'data-advice="summary"' in answer.json()["html"]


def test_the_team_page_shows_quotas_and_use(app_client, sessionmaker):
    from tokenmill.quotas import set_quotas

    team, key = make_team(sessionmaker)
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, {"corpora": 7})
    with TestClient(app_client.app) as client:
        uploaded = client.post("/v1/corpora", headers={"Authorization": f"Bearer {key}"},
                               data={"name": "c", "domain": "news", "language": "eng_Latn"},
                               files={"file": ("c.txt", io.BytesIO(b"one line\n"))})
        assert uploaded.status_code == 201, uploaded.text
        sign_in(client, key)
        page = client.get("/team")
    assert page.status_code == 200
    row = re.search(r'data-quota="corpora">(.*?)</tr>', page.text, re.S).group(1)
    assert re.findall(r'class="num">([^<]*)<', row) == ["7", "1"]
