"""Request ids (service/logs.py): in the X-Request-ID header, in every problem+json body, in every log line."""

import json
import logging
import uuid

import httpx
import pytest
from fastapi.testclient import TestClient

from service.app import create_app
from service.logs import RequestIdFilter
from tests.conftest import make_team
from tests.stack import api_process
from tests.waiting import until


def test_a_problem_body_and_its_header_carry_the_same_id(api):
    missing = api.get(f"/v1/corpora/{uuid.uuid4()}")
    # Answered by the Authentication middleware, before any route.
    unauthenticated = api.get("/v1/corpora", headers={"Authorization": "Bearer not-a-key"})
    for response in (missing, unauthenticated):
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["request_id"] == response.headers["x-request-id"]
    assert missing.headers["x-request-id"] != unauthenticated.headers["x-request-id"]


def test_every_answer_has_an_id_of_its_own(api):
    first, second = api.get("/v1/corpora"), api.get("/v1/corpora")
    assert first.status_code == second.status_code == 200
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


def test_a_sane_incoming_id_is_echoed(api):
    incoming = "0190a1b2-c3d4:trace/span=1+2_x.y"
    response = api.get(f"/v1/corpora/{uuid.uuid4()}", headers={"X-Request-ID": incoming})
    assert response.headers["x-request-id"] == incoming
    assert response.json()["request_id"] == incoming


@pytest.mark.parametrize("hostile", ["a" * 129, "abc\x01def", "abc\x1b[31mred", "id with spaces", "café".encode(),
                                     '"}, {"admin": true', ""])
def test_a_hostile_incoming_id_is_replaced(api, hostile):
    response = api.get(f"/v1/corpora/{uuid.uuid4()}", headers={"X-Request-ID": hostile})
    replaced = response.headers["x-request-id"]
    assert replaced != (hostile.decode() if isinstance(hostile, bytes) else hostile)
    assert response.json()["request_id"] == replaced
    assert len(replaced) == 32 and int(replaced, 16) >= 0


class Kept(logging.Handler):
    """Keeps the records it is given, request ids filled in as the JSON handler's are."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.addFilter(RequestIdFilter())

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_every_line_logged_during_a_request_carries_its_id_even_a_500(settings):
    app = create_app(settings)
    said = logging.getLogger("tests.request_ids")

    @app.get("/boom")
    def boom():  # a synchronous route: it runs in the thread pool, in a copy of the request's context
        said.warning("about to fail")
        raise RuntimeError("boom")

    kept = Kept()
    root = logging.getLogger()
    root.addHandler(kept)
    try:
        response = TestClient(app, raise_server_exceptions=False).get("/boom", headers={"X-Request-ID": "req-500"})
    finally:
        root.removeHandler(kept)
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-500"
    assert response.json()["request_id"] == "req-500"
    mine = {record.name: record for record in kept.records if record.name in
            ("tests.request_ids", "service.access", "service.problems")}
    assert set(mine) == {"tests.request_ids", "service.access", "service.problems"}  # the route, the access line, the 500
    assert {record.request_id for record in mine.values()} == {"req-500"}
    assert (mine["service.access"].route, mine["service.access"].status) == ("/boom", 500)


def test_a_real_api_process_writes_json_lines_with_request_ids(settings, sessionmaker, tmp_path):
    team, key = make_team(sessionmaker)
    log = tmp_path / "api.log"
    with api_process(settings, log) as base:
        headers = {"Authorization": f"Bearer {key}"}
        listed = httpx.get(f"{base}/v1/corpora", headers={**headers, "X-Request-ID": "trace-listing-1"})
        missing = httpx.get(f"{base}/v1/corpora/{uuid.uuid4()}", headers={**headers, "X-Request-ID": "x" * 500})
        assert listed.headers["x-request-id"] == "trace-listing-1"
        replaced = missing.json()["request_id"]

        def access_lines() -> dict[str, dict]:
            lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]  # each one is JSON
            return {line["request_id"]: line for line in lines if line["logger"] == "service.access"}

        seen = until(access_lines, lambda lines: {"trace-listing-1", replaced} <= set(lines), timeout=10, every=0.1)
    listing = seen["trace-listing-1"]
    assert (listing["method"], listing["route"], listing["status"], listing["team"]) == (
        "GET", "/v1/corpora", 200, team.name)
    assert listing["level"] == "INFO" and listing["duration_ms"] > 0 and listing["time"].endswith("+00:00")
    assert (seen[replaced]["route"], seen[replaced]["status"]) == ("/v1/corpora/{corpus_id}", 404)
    # Uvicorn's own lines are JSON too, and its plain access line is gone.
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert any(line["logger"].startswith("uvicorn") for line in lines)
    assert not any(line["logger"] == "uvicorn.access" for line in lines)
