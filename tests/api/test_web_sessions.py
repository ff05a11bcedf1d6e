"""Dashboard sessions live server-side: signing out ends them for good, a revoked key ends them, CSRF still holds."""

import uuid

from fastapi.testclient import TestClient
from itsdangerous import URLSafeTimedSerializer

from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tokenmill.db import transaction
from tokenmill.models import WebSession
from tokenmill.teams import hash_key, revoke_key

SIGNED_IN = 200


def browser(app_client) -> TestClient:
    """A client with its own cookie jar on the test app."""
    return TestClient(app_client.app, follow_redirects=False)


def test_a_cookie_kept_after_signing_out_no_longer_signs_in(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    client = browser(app_client)
    token = sign_in(client, key)
    cookie = client.cookies["tokenmill_session"]
    assert client.get("/corpora").status_code == SIGNED_IN
    assert client.post("/signout", data={"csrf_token": token}).headers["location"] == "/signin"
    replay = browser(app_client)
    replay.cookies.set("tokenmill_session", cookie)
    response = replay.get("/corpora")
    assert response.status_code == 303 and response.headers["location"].startswith("/signin")
    session_id = uuid.UUID(URLSafeTimedSerializer("any").loads_unsafe(cookie)[1])
    with sessionmaker() as session:
        assert session.get_one(WebSession, session_id).ended_at is not None


def test_the_cookie_names_a_session_row_not_the_key(app_client, sessionmaker):
    team, key = make_team(sessionmaker)
    client = browser(app_client)
    sign_in(client, key)
    value = URLSafeTimedSerializer("any").loads_unsafe(client.cookies["tokenmill_session"])[1]
    assert key not in value and hash_key(key) not in value
    with sessionmaker() as session:
        row = session.get_one(WebSession, uuid.UUID(value))
    assert (row.team_id, row.key_hash, row.ended_at) == (team.id, hash_key(key), None)


def test_revoking_the_key_signs_its_sessions_out(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    client = browser(app_client)
    sign_in(client, key)
    with transaction(sessionmaker) as session:
        revoke_key(session, key)
    assert client.get("/corpora").status_code == 303


def test_signing_out_needs_the_csrf_token_and_one_session_ending_leaves_the_others(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    first, second = browser(app_client), browser(app_client)
    token = sign_in(first, key)
    sign_in(second, key)
    assert first.post("/signout").status_code == 403
    assert first.post("/signout", data={"csrf_token": "forged"}).status_code == 403
    assert first.post("/signout", data={"csrf_token": token + "é"}).status_code == 403  # not a 500
    assert first.get("/corpora").status_code == SIGNED_IN
    assert first.post("/signout", data={"csrf_token": token}).status_code == 303
    assert second.get("/corpora").status_code == SIGNED_IN


def test_a_cookie_from_before_session_rows_is_no_session(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    client = browser(app_client)
    secret = app_client.app.state.settings.secret_key.get_secret_value()
    legacy = URLSafeTimedSerializer(secret, salt="tokenmill.web.session").dumps(hash_key(key))
    client.cookies.set("tokenmill_session", legacy)
    assert client.get("/corpora").status_code == 303
