"""Dashboard sessions, CSRF and the no-script upload, over plain HTTP against the real stack."""

import re
import uuid

import httpx
import pytest
from itsdangerous import URLSafeTimedSerializer

from tests.waiting import until
from tokenmill.db import transaction
from tokenmill.teams import revoke_key


def sign_in(stack: str, key: str, next_url: str = "/jobs") -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(base_url=stack, follow_redirects=False, timeout=60)
    nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/signin").text).group(1)
    return client, client.post("/signin", data={"api_key": key, "nonce": nonce, "next": next_url})


def csrf_of(client: httpx.Client) -> str:
    return re.search(r'name="csrf-token" content="([^"]+)"', client.get("/corpora").text).group(1)


@pytest.fixture
def signed_in(stack, team_key):
    _, key = team_key
    client, response = sign_in(stack, key)
    assert response.status_code == 303 and response.headers["location"] == "/jobs"
    yield client, response, key
    client.close()


def test_the_session_cookie_holds_a_signed_session_id_httponly_and_strict(signed_in):
    client, response, key = signed_in
    cookie = next(h for h in response.headers.get_list("set-cookie") if h.startswith("tokenmill_session="))
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and "secure" not in cookie.lower()
    value = client.cookies["tokenmill_session"]
    assert key not in value
    named = URLSafeTimedSerializer("any").loads_unsafe(value)[1]  # readable, but only a session row's id
    assert str(uuid.UUID(named)) == named
    page = client.get("/")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["content-security-policy"]
    client.cookies.set("tokenmill_session", value[:-2] + ("AA" if not value.endswith("AA") else "BB"))
    assert client.get("/").status_code == 303  # a tampered signature is no session


def test_every_post_needs_the_csrf_token(signed_in):
    client, _, _ = signed_in
    token = csrf_of(client)
    assert client.post("/signout").status_code == 403
    assert client.post("/jobs/new", data={"tokenizer": "x", "csrf_token": "forged"}).status_code == 403
    json_headers = {"Accept": "application/json"}
    refused = client.post("/playground/encode", json={"text": "hi", "target": "reference:gpt2"}, headers=json_headers)
    assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
    encoded = client.post("/playground/encode", json={"text": "hi", "target": "reference:gpt2"},
                          headers={**json_headers, "X-CSRF-Token": token})
    assert encoded.status_code == 200 and encoded.json()["count"] == 1
    assert client.get("/jobs").status_code == 200  # still signed in
    assert client.post("/signout", data={"csrf_token": token}).headers["location"] == "/signin"


def test_signing_in_needs_the_forms_nonce_and_a_local_next(stack, team_key):
    _, key = team_key
    client = httpx.Client(base_url=stack, follow_redirects=False)
    client.get("/signin")
    assert client.post("/signin", data={"api_key": key, "nonce": "guess"}).status_code == 403
    _, response = sign_in(stack, key, next_url="//evil.example/steal")
    assert response.headers["location"] == "/"


def test_a_revoked_key_ends_its_sessions(signed_in, sessionmaker):
    client, _, key = signed_in
    with transaction(sessionmaker) as session:
        revoke_key(session, key)
    assert client.get("/").headers["location"] == "/signin?next=%2F"
    status = client.get("/jobs/00000000-0000-0000-0000-000000000000/status", headers={"Accept": "application/json"})
    assert status.status_code == 401


def test_upload_without_script_redirects_and_queues_the_statistics(signed_in):
    client, _, _ = signed_in
    token = csrf_of(client)
    # A browser whose file input is empty still sends the part, with no file name.
    missing = client.post("/corpora", data={"csrf_token": token, "name": "n", "domain": "d", "language": "l"},
                          files={"file": ("", b"")})
    assert missing.status_code == 422 and "choose a file to upload" in missing.text
    lines = "".join(f"line {i} of a small corpus with words {i % 7}\n" for i in range(200))
    response = client.post("/corpora", data={"csrf_token": token, "name": "plain", "domain": "web", "language": "en"},
                           files={"file": ("plain.txt", lines.encode())})
    assert response.status_code == 303
    corpus_page = response.headers["location"]
    page = until(lambda: client.get(corpus_page).text, lambda page: 'data-stat="distinct_words"' in page, 60)
    assert 'id="zipf"' in page and 'id="heaps"' in page
