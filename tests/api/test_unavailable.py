"""A database, store or broker that does not answer: honest answers, problem+json, nothing leaked.

Each app here is the real one, on the test run's services, with one of them replaced by a
port nothing listens on, or by a proxy (tests/faults/proxy.py) the test cuts. The machine's
servers are never stopped.
"""

import io
import socket
import threading
import time
import uuid
from urllib.parse import urlparse

import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.queue import Queue
from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tests.faults.proxy import TcpProxy
from tests.services import free_port

PROBLEM = "application/problem+json"


def closed_port_url(url: str) -> str:
    """`url` with its host:port replaced by a loopback port nothing listens on."""
    parsed = urlparse(url)
    return url.replace(parsed.netloc.rsplit("@", 1)[-1], f"127.0.0.1:{free_port()}", 1)


def client_for(settings, **changes) -> TestClient:
    return TestClient(create_app(settings.model_copy(update=changes)), raise_server_exceptions=False)


def leaks_nothing(response, *urls: str) -> None:
    text = response.text
    for url in urls:
        parsed = urlparse(url)
        assert parsed.hostname not in text and str(parsed.port) not in text, text
    assert "Error" not in text.replace("Internal error", ""), text  # no exception class names


def upload(client, headers=None, name="c"):
    return client.post("/v1/corpora", data={"name": name, "domain": "news", "language": "en"},
                       files={"file": ("c.txt", io.BytesIO(b"some words\n"))}, headers=headers or {})


@pytest.fixture(scope="module")
def no_database(settings):
    url = closed_port_url(settings.database_url)
    with client_for(settings, database_url=url) as client:
        yield client, url


def test_a_database_that_does_not_answer_is_a_503_problem_with_retry_after(no_database, team_key):
    client, url = no_database
    response = client.get("/v1/corpora", headers={"Authorization": f"Bearer {team_key[1]}"})
    assert response.status_code == 503 and response.headers["content-type"] == PROBLEM
    assert int(response.headers["retry-after"]) > 0
    assert "database" in response.json()["detail"]
    leaks_nothing(response, url)


def test_a_route_whose_query_fails_is_a_503_too(no_database):
    # Signing in queries the database inside the route (not in the middleware).
    client, url = no_database
    nonce = client.get("/signin").cookies["tokenmill_signin"]
    response = client.post("/signin", data={"api_key": "tm_x", "nonce": nonce})
    assert response.status_code == 503 and response.headers["content-type"] == PROBLEM
    assert "retry-after" in response.headers
    leaks_nothing(response, url)


def test_healthz_names_the_failing_check_without_its_address(no_database):
    client, url = no_database
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable",
                               "checks": {"database": "unavailable", "broker": "ok", "store": "ok"}}
    leaks_nothing(response, url)


def test_a_store_that_does_not_answer_is_a_503_on_upload(settings, team_key):
    url = closed_port_url(settings.s3_endpoint_url)
    with client_for(settings, s3_endpoint_url=url) as client:
        response = upload(client, {"Authorization": f"Bearer {team_key[1]}"})
        assert response.status_code == 503 and response.headers["content-type"] == PROBLEM
        assert "object store" in response.json()["detail"] and "retry-after" in response.headers
        leaks_nothing(response, url)
        assert client.get("/v1/corpora", headers={"Authorization": f"Bearer {team_key[1]}"}).json()["total"] == 0


def test_deleting_a_corpus_while_the_store_is_down_deletes_the_row(settings, store, team_key, caplog):
    endpoint = urlparse(settings.s3_endpoint_url)
    proxy = TcpProxy(endpoint.hostname, endpoint.port)
    headers = {"Authorization": f"Bearer {team_key[1]}"}
    try:
        with client_for(settings, s3_endpoint_url=proxy.url_for(settings.s3_endpoint_url)) as client:
            corpus = upload(client, headers).json()
            proxy.cut()
            response = client.delete(f"/v1/corpora/{corpus['id']}", headers=headers)
            assert response.status_code == 204
            assert client.get(f"/v1/corpora/{corpus['id']}", headers=headers).status_code == 404
    finally:
        proxy.cut()
    assert any("left in the store" in record.getMessage() for record in caplog.records)
    key = f"corpora/{team_key[0].id}/{corpus['id']}"
    assert store.get_bytes(key) == b"some words\n"  # an orphan, for the reconciliation pass
    store.delete_prefix(key)


@pytest.fixture(scope="module")
def no_broker(settings):
    with client_for(settings, broker_url=closed_port_url(settings.broker_url)) as client:
        yield client


def test_with_the_broker_down_submissions_are_committed_and_answered_honestly(no_broker, sessionmaker):
    _team, key = make_team(sessionmaker)
    headers = {"Authorization": f"Bearer {key}"}
    started = time.monotonic()
    corpus = upload(no_broker, headers)
    job = no_broker.post("/v1/jobs", json={"tokenizer": "t", "train_corpora": [corpus.json()["id"]]}, headers=headers)
    run = no_broker.post("/v1/evaluations", json={"reference": "gpt2"}, headers=headers)
    assert time.monotonic() - started < 20  # three sends, each bounded
    assert corpus.status_code == 201, corpus.text
    assert job.status_code == 202 and job.json()["status"] == "queued", job.text
    assert run.status_code == 202 and run.json()["status"] == "queued", run.text
    # The rows are there, queued: the sweeper sends them once the broker is back.
    assert no_broker.get(f"/v1/jobs/{job.json()['id']}", headers=headers).json()["status"] == "queued"
    assert no_broker.get(f"/v1/evaluations/{run.json()['id']}", headers=headers).json()["status"] == "queued"


def test_with_the_broker_down_the_dashboard_job_form_submits(no_broker, sessionmaker):
    _team, key = make_team(sessionmaker)
    corpus = upload(no_broker, {"Authorization": f"Bearer {key}"}).json()
    token = sign_in(no_broker, key)
    response = no_broker.post("/jobs/new", data={"csrf_token": token, "tokenizer": "web", "spec.vocab_size": "1000",
                                                 "train_corpora": corpus["id"]}, follow_redirects=False)
    assert response.status_code == 303, response.text[:500]
    jobs = no_broker.get("/v1/jobs", headers={"Authorization": f"Bearer {key}"}).json()
    assert [job["status"] for job in jobs["items"]] == ["queued"]


def test_a_broker_that_accepts_and_never_answers_does_not_hold_a_send(settings):
    silent = socket.create_server(("127.0.0.1", 0))  # connections are accepted by the kernel, never answered
    queue = Queue(settings.model_copy(update={"broker_url": f"redis://127.0.0.1:{silent.getsockname()[1]}/9"}))
    sent: list[bool] = []
    started = time.monotonic()
    sender = threading.Thread(target=lambda: sent.append(queue.send_training(uuid.uuid4())), daemon=True)
    sender.start()
    sender.join(30)
    silent.close()
    assert sent == [False] and time.monotonic() - started < 15


def test_an_unexpected_error_is_a_generic_500_problem(settings, team_key, caplog):
    app = create_app(settings)

    @app.get("/v1/broken")
    def broken():
        raise RuntimeError("could not reach postgresql://admin:hunter2@db.internal:5432/prod")

    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/v1/broken", headers={"Authorization": f"Bearer {team_key[1]}"})
    assert response.status_code == 500 and response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["title"] == "Internal error" and "incident" in body["detail"]
    assert "hunter2" not in response.text and "db.internal" not in response.text and "RuntimeError" not in response.text
    assert any("db.internal" in str(record.exc_info[1]) for record in caplog.records if record.exc_info)
