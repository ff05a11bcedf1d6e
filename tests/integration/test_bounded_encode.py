"""A version whose pre-tokenization regex backtracks catastrophically cannot freeze the API: its
encode is cut short with a 422 on `text` while other teams' requests, encodes included, stay fast.

The version is built here, row and files: a custom regex that passes the submission probe is
not catastrophic, so a tiny tokenizer is trained with a preset's regex and its tokenizer.json
then given `(b+)+c` (as a version trained before the probe was strengthened would have it).
"""

import json
import re
import threading
import time

import httpx
import pytest

from tests.integration.served import add_version
from tests.stack import api_process
from tokenmill.db import transaction
from tokenmill.teams import create_team
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec

TIMEOUT = 3  # TOKENMILL_ENCODE_TIMEOUT_SECONDS of the API under test
SLOW_TEXT = ("b" * 23 + "!") * 200  # a minute of Oniguruma's backtracking under (b+)+c, unbounded
LINES = ["the boy plays in the garden", "bbb ccc !!! 1234", "tokenizers turn text into numbers"] * 20


def tokenizer_files(regex: str | None) -> tuple[dict[str, bytes], int]:
    tokenizer = with_tokenizers.train(resolve_spec({"vocab_size": 300}), LINES)
    data = json.loads(tokenizer.to_str())
    if regex:
        data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex
    return {"tokenizer.json": json.dumps(data).encode()}, tokenizer.get_vocab_size()


@pytest.fixture(scope="module")
def api(settings, tmp_path_factory):
    with api_process(settings, tmp_path_factory.mktemp("bounded") / "api.log",
                     TOKENMILL_ENCODE_TIMEOUT_SECONDS=str(TIMEOUT)) as base:
        yield base


def new_team(sessionmaker, store, regex: str | None) -> str:
    """The API key of a new team that has version 1 of "tok", splitting with `regex` if given."""
    with transaction(sessionmaker) as session:
        team, key = create_team(session, f"bounded-{time.monotonic_ns()}")
    files, vocab_size = tokenizer_files(regex)
    spec = resolve_spec({"vocab_size": 300}).model_copy(update={"pre_tokenizer": "none", "pre_tokenizer_regex": regex})
    add_version(sessionmaker, store, team, "tok", spec, files, vocab_size)
    return key


def test_a_catastrophic_regex_is_cut_short_while_other_teams_stay_fast(api, sessionmaker, store):
    slow_key, other_key = new_team(sessionmaker, store, "(b+)+c"), new_team(sessionmaker, store, None)
    slow = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {slow_key}"}, timeout=300)
    other = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {other_key}"}, timeout=300)
    encode = "/v1/tokenizers/tok/versions/1/encode"
    assert slow.post(encode, json={"text": "harmless text"}).status_code == 200  # the pool is up, the version loaded
    outcome = {}

    def slow_encode() -> None:
        started = time.monotonic()
        outcome["response"] = slow.post(encode, json={"text": SLOW_TEXT})
        outcome["seconds"] = time.monotonic() - started

    worker = threading.Thread(target=slow_encode)
    worker.start()
    time.sleep(0.5)  # the slow encode is in flight
    waits = []
    for path, request in (("/v1/corpora", lambda: other.get("/v1/corpora")),
                          (encode, lambda: other.post(encode, json={"text": "the boy plays"}))):
        started = time.monotonic()
        response = request()
        waits.append((path, response.status_code, time.monotonic() - started))
    worker.join(300)

    # Unbounded, each of these waited for the whole minute of backtracking (the GIL was held).
    assert all(status == 200 and seconds < 3 for _, status, seconds in waits), waits
    response = outcome["response"]
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["field"] == "text" and "pre-tokenization regex took longer" in problem["detail"]
    assert outcome["seconds"] < TIMEOUT + 15
    # The killed process was replaced: the same version encodes an ordinary text again.
    assert slow.post(encode, json={"text": "the garden"}).status_code == 200


def test_a_text_past_the_engines_retry_limit_is_a_422_not_a_crash(api, sessionmaker, store):
    key = new_team(sessionmaker, store, "(b+)+c")
    client = httpx.Client(base_url=api, headers={"Authorization": f"Bearer {key}"}, timeout=300)
    response = client.post("/v1/tokenizers/tok/versions/1/encode", json={"text": "b" * 3000 + "!"})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "text"


def test_the_dashboard_playground_is_bounded_too(api, sessionmaker, store):
    key = new_team(sessionmaker, store, "(b+)+c")
    with httpx.Client(base_url=api, follow_redirects=False, timeout=300) as web:
        nonce = re.search(r'name="nonce" value="([^"]+)"', web.get("/signin").text).group(1)
        assert web.post("/signin", data={"api_key": key, "nonce": nonce, "next": "/jobs"}).status_code == 303
        started = time.monotonic()
        page = web.get("/tokenizers/tok/versions/1", params={"text": SLOW_TEXT})
        assert time.monotonic() - started < TIMEOUT + 15
        assert page.status_code == 422 and "pre-tokenization regex took longer" in page.text
        token = re.search(r'name="csrf-token" content="([^"]+)"', page.text).group(1)
        panel = web.post("/playground/encode", json={"text": SLOW_TEXT, "target": "version:tok@1"},
                         headers={"Accept": "application/json", "X-CSRF-Token": token})
        assert panel.status_code == 422 and panel.json()["field"] == "text"
