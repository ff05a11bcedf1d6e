"""Signing a test client in to the dashboards, as a browser does (a TestClient or an httpx.Client)."""

import re


def sign_in(client, key: str) -> str:
    """Sign `client` in with an API key (its cookie jar keeps the session); returns the session's CSRF token."""
    nonce = re.search(r'name="nonce" value="([^"]+)"', client.get("/signin").text).group(1)
    response = client.post("/signin", data={"api_key": key, "nonce": nonce, "next": "/corpora"}, follow_redirects=False)
    assert response.status_code == 303, response.text[:300]
    return csrf_of(client)


def csrf_of(client) -> str:
    return re.search(r'name="csrf-token" content="([^"]+)"', client.get("/corpora").text).group(1)
