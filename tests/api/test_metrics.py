"""GET /metrics (service/metrics.py): requests by route template, quota refusals, work per team, durations, the guard."""

import io
import uuid
from datetime import timedelta
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import SecretStr

from service.app import create_app
from service.metrics import Metrics
from tokenmill.db import make_engine, make_sessionmaker, migrate, transaction, utcnow
from tokenmill.models import Status, Team, TrainingJob
from tokenmill.quotas import set_quotas

PROBLEM = "application/problem+json"
VERSION_ROUTE = "/v1/tokenizers/{name}/versions/{version}"


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape, by name and labels."""
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(scrape: dict, name: str, **labels: str) -> float:
    return scrape.get((name, frozenset(labels.items())), 0.0)


def scrape(client) -> dict:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def upload(api, text=b"some text here\nand more text\n") -> str:
    response = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "eng_Latn"},
                        files={"file": ("c.txt", io.BytesIO(text))})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def submit(api, corpus: str):
    return api.post("/v1/jobs", json={"tokenizer": "t", "spec": {"vocab_size": 300}, "train_corpora": [corpus]})


def test_a_request_is_counted_under_its_route_template_never_its_path(api):
    name = f"nothing-{uuid.uuid4().hex[:8]}"
    before = scrape(api)
    assert api.get(f"/v1/tokenizers/{name}/versions/1").status_code == 404
    assert api.get(f"/v1/no-such-{name}").status_code == 404
    assert api.request("BREW", "/v1/corpora").status_code == 405
    after_text = api.get("/metrics").text
    after = samples(after_text)
    labels = {"route": VERSION_ROUTE, "method": "GET", "status": "404"}
    assert value(after, "tokenmill_http_requests_total", **labels) == value(before, "tokenmill_http_requests_total",
                                                                             **labels) + 1
    assert value(after, "tokenmill_http_request_duration_seconds_count", **labels) == \
        value(before, "tokenmill_http_request_duration_seconds_count", **labels) + 1
    unmatched = {"route": "unmatched", "method": "GET", "status": "404"}
    assert value(after, "tokenmill_http_requests_total", **unmatched) == \
        value(before, "tokenmill_http_requests_total", **unmatched) + 1
    # A method nobody knows is one label value, not one per spelling.
    assert value(after, "tokenmill_http_requests_total", route="/v1/corpora", method="OTHER", status="405") >= 1
    assert name not in after_text


def test_a_request_answered_at_the_edge_keeps_its_route(app_client):
    labels = {"route": "/v1/jobs/{job_id}", "method": "GET", "status": "401"}
    before = value(scrape(app_client), "tokenmill_http_requests_total", **labels)
    assert app_client.get(f"/v1/jobs/{uuid.uuid4()}").status_code == 401  # refused before routing
    assert value(scrape(app_client), "tokenmill_http_requests_total", **labels) == before + 1


def test_a_queued_jobs_refusal_is_counted_under_its_quota(api, sessionmaker, team_key):
    team, _ = team_key
    with transaction(sessionmaker) as session:  # before the team's first request: the API keeps quotas 5 s
        set_quotas(session, team.id, {"queued_jobs": 0})
    corpus = upload(api)
    labels = {"quota": "queued_jobs", "status": "409"}
    before = value(scrape(api), "tokenmill_quota_refusals_total", **labels)
    refused = submit(api, corpus)
    assert refused.status_code == 409 and refused.json()["quota"] == "queued_jobs"
    assert value(scrape(api), "tokenmill_quota_refusals_total", **labels) == before + 1


def test_a_rate_limited_request_is_counted_under_its_quota(api, sessionmaker, team_key, settings):
    team, _ = team_key
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, {"requests_per_minute": 0})
    labels = {"quota": "requests_per_minute", "status": "429"}
    before = value(scrape(api), "tokenmill_quota_refusals_total", **labels)
    answers = [api.post("/v1/references/gpt2/encode", json={"text": "hi"}).status_code
               for _ in range(settings.rate_burst + 1)]
    assert answers == [200] * settings.rate_burst + [429]
    assert value(scrape(api), "tokenmill_quota_refusals_total", **labels) == before + 1


def test_queue_depth_and_upload_bytes_per_team(api, team_key):
    team, _ = team_key
    text = b"one line of text\n" * 1000
    corpus = upload(api, text)
    before = scrape(api)
    assert value(before, "tokenmill_work_queued", team=team.name, kind="training_job") == 0
    assert value(before, "tokenmill_upload_bytes_total", route="/v1/corpora", team=team.name) >= len(text)
    assert submit(api, corpus).status_code == 202  # no worker runs here: it stays queued
    after = scrape(api)
    assert value(after, "tokenmill_metrics_database_up") == 1
    assert value(after, "tokenmill_work_queued", team=team.name, kind="training_job") == 1
    assert value(after, "tokenmill_work_running", team=team.name, kind="training_job") == 0
    assert value(after, "tokenmill_work_queued", team=team.name, kind="evaluation_run") == 0


def finished_job(session, team_id, seconds: float, status: Status = Status.SUCCEEDED) -> None:
    finished = utcnow() - timedelta(minutes=5)
    session.add(TrainingJob(team_id=team_id, tokenizer="t", spec={}, train_corpus_ids=[], eval_corpus_ids=[],
                            status=status.value, started_at=finished - timedelta(seconds=seconds),
                            finished_at=finished))


def duration_deltas(before: dict, after: dict, status: str) -> dict[str, float]:
    def delta(name: str, **labels: str) -> float:
        key = (f"tokenmill_work_duration_seconds_{name}", frozenset({"kind": "training_job", "status": status,
                                                                     **labels}.items()))
        return after[key] - before[key]  # each series is there, zeros included

    return {le: delta("bucket", le=le) for le in ("60.0", "120.0", "+Inf")} | {"sum": delta("gsum")}


def test_durations_of_recent_work_fall_in_their_buckets(app_client, sessionmaker, team_key):
    team, _ = team_key
    before = scrape(app_client)
    with transaction(sessionmaker) as session:
        finished_job(session, team.id, 90)
        finished_job(session, team.id, 30, Status.FAILED)
        finished_job(session, team.id, 5, Status.CANCELLED)  # says nothing about the work: not counted
    after = scrape(app_client)
    assert duration_deltas(before, after, "succeeded") == pytest.approx({"60.0": 0, "120.0": 1, "+Inf": 1, "sum": 90})
    assert duration_deltas(before, after, "failed") == pytest.approx({"60.0": 1, "120.0": 1, "+Inf": 1, "sum": 30})


def test_the_work_read_works_on_sqlite_too(tmp_path):
    url = f"sqlite:///{tmp_path / 'metrics.db'}"
    migrate(url)
    engine = make_engine(url)
    try:
        factory = make_sessionmaker(engine)
        with transaction(factory) as session:
            team = Team(name="local")
            session.add(team)
            session.flush()
            finished_job(session, team.id, 90)
            session.add(TrainingJob(team_id=team.id, tokenizer="t", spec={}, train_corpus_ids=[], eval_corpus_ids=[]))
        scraped = samples(generate_latest(Metrics(SimpleNamespace(sessionmaker=factory)).registry).decode())
    finally:
        engine.dispose()
    assert value(scraped, "tokenmill_metrics_database_up") == 1
    assert value(scraped, "tokenmill_work_queued", team="local", kind="training_job") == 1
    bucket = "tokenmill_work_duration_seconds_bucket"
    assert value(scraped, bucket, kind="training_job", status="succeeded", le="60.0") == 0
    assert value(scraped, bucket, kind="training_job", status="succeeded", le="120.0") == 1
    assert value(scraped, "tokenmill_work_duration_seconds_gsum", kind="training_job",
                 status="succeeded") == pytest.approx(90, abs=0.01)


def test_with_the_database_away_the_scrape_still_answers():
    engine = make_engine("postgresql+psycopg://nobody@127.0.0.1:1/nothing")  # nothing listens on port 1
    try:
        metrics = Metrics(SimpleNamespace(sessionmaker=make_sessionmaker(engine)))
        metrics.observe_request("/v1/corpora", "GET", 200, 0.01)
        scraped = samples(generate_latest(metrics.registry).decode())
    finally:
        engine.dispose()
    assert value(scraped, "tokenmill_metrics_database_up") == 0
    assert value(scraped, "tokenmill_http_requests_total", route="/v1/corpora", method="GET", status="200") == 1
    assert not any(name.startswith("tokenmill_work_") for name, _ in scraped)


def test_the_sandbox_pool_is_shown_once_running(app_client):
    app_client.headers["Authorization"] = "Bearer nobody"  # /metrics takes no API key: ignored
    try:
        scraped = scrape(app_client)
    finally:
        app_client.headers.pop("Authorization")
    assert value(scraped, "tokenmill_sandbox_size") >= 1  # the lifespan started it
    assert "tokenmill_sandbox_checkouts_total" in {name for name, _ in scraped}


def test_a_token_guards_the_metrics(settings):
    with TestClient(create_app(settings.model_copy(update={"metrics_token": SecretStr("scrape-me")}))) as client:
        missing = client.get("/metrics")
        wrong = client.get("/metrics", headers={"Authorization": "Bearer scrape-you"})
        right = client.get("/metrics", headers={"Authorization": "Bearer scrape-me"})
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.headers["content-type"] == PROBLEM
        assert refused.headers["www-authenticate"] == "Bearer"
    assert right.status_code == 200
    assert "tokenmill_http_requests_total" in right.text


def test_disabled_metrics_are_absent(settings):
    client = TestClient(create_app(settings.model_copy(update={"metrics_enabled": False})))
    response = client.get("/metrics")
    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
