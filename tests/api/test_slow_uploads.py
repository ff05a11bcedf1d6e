"""Slow uploads hold no database connection and no thread of the synchronous routes: forty-five of them leave the API
answering, through the API as through the dashboard.

Forty-five is more than the database pool's 5 + 5 connections and more than the 40 threads
that serve the synchronous routes (GET /v1/corpora among them): uploads stream in threads
of their own (service/uploads.py). Each client trickles its body for about two seconds, then
the API streams the file to a store that takes it at 64 KB/s (tests/api/conftest.py).
Meanwhile another team's `GET /v1/corpora` must answer within a couple of seconds, every time.
"""

import threading
import time
from collections.abc import Callable

import httpx
import pytest

from tests.api.dashboard import sign_in
from tokenmill.db import transaction
from tokenmill.quotas import set_quotas

UPLOADS = 45
FILE_BYTES = 320 * 1024  # five seconds of the slow store
TRICKLE_SECONDS = 2.0
FAST_ENOUGH = 2.0


def multipart(fields: dict[str, str], data: bytes) -> tuple[bytes, str]:
    """The body and content type of a multipart form with one file."""
    request = httpx.Request("POST", "http://x/", data=fields, files={"file": ("slow.txt", data, "text/plain")})
    return request.read(), request.headers["content-type"]


def trickle(body: bytes, seconds: float, pieces: int = 20):
    """The body in pieces, spread over `seconds`: a client on a slow line (sent chunked)."""
    size = -(-len(body) // pieces)
    for start in range(0, len(body), size):
        time.sleep(seconds / pieces)
        yield body[start:start + size]


def corpus_text(index: int) -> bytes:
    line = f"upload {index} trickles in slowly, word after word\n".encode()
    return line * (FILE_BYTES // len(line))


def upload_api(base: str, key: str) -> Callable[[int], int]:
    """What sends upload number i through the API."""
    def send(index: int) -> int:
        body, content_type = multipart({"name": f"slow-{index}", "domain": "web", "language": "en"}, corpus_text(index))
        with httpx.Client(base_url=base, timeout=120) as client:
            return client.post("/v1/corpora", content=trickle(body, TRICKLE_SECONDS),
                               headers={"Authorization": f"Bearer {key}", "Content-Type": content_type}).status_code

    return send


def upload_dashboard(base: str, key: str) -> Callable[[int], int]:
    """What sends upload number i through the dashboard, in one session signed in beforehand (not forty-five
    sign-ins racing the reads that are measured)."""
    with httpx.Client(base_url=base, timeout=60) as browser:
        token, cookies = sign_in(browser, key), browser.cookies

    def send(index: int) -> int:
        body, content_type = multipart({"csrf_token": token, "name": f"slow-{index}", "domain": "web",
                                        "language": "en"}, corpus_text(index))
        with httpx.Client(base_url=base, timeout=120, cookies=cookies) as client:
            return client.post("/corpora", content=trickle(body, TRICKLE_SECONDS),
                               headers={"Content-Type": content_type, "Accept": "application/json"}).status_code

    return send


def timed_listing(base: str, key: str) -> float:
    started = time.monotonic()
    try:
        response = httpx.get(f"{base}/v1/corpora", headers={"Authorization": f"Bearer {key}"}, timeout=15)
        assert response.status_code == 200, response.text[:300]
    except httpx.TimeoutException:
        pass  # counted as what it is: far too slow
    return time.monotonic() - started


@pytest.mark.parametrize("upload", [upload_api, upload_dashboard], ids=["api", "dashboard"])
def test_slow_uploads_leave_the_api_answering(served_api, sessionmaker, upload):
    from tests.conftest import make_team

    (uploading, uploader), (_, reader) = make_team(sessionmaker), make_team(sessionmaker)
    with transaction(sessionmaker) as session:  # far more at once than the default quotas let a team send
        set_quotas(session, uploading.id, {"concurrent_uploads": UPLOADS, "requests_per_minute": 10**6})
    send, statuses = upload(served_api, uploader), []
    threads = [threading.Thread(target=lambda i=i: statuses.append(send(i))) for i in range(UPLOADS)]
    for thread in threads:
        thread.start()
    time.sleep(TRICKLE_SECONDS / 2)
    latencies = []
    for _ in range(8):  # over the trickle and the slow store writes that follow
        latencies.append(timed_listing(served_api, reader))
        time.sleep(0.5)
    for thread in threads:
        thread.join(120)
    assert max(latencies) < FAST_ENOUGH, [round(x, 2) for x in latencies]
    assert statuses == [201] * UPLOADS
    listing = httpx.get(f"{served_api}/v1/corpora", headers={"Authorization": f"Bearer {uploader}"}).json()
    assert listing["total"] == UPLOADS
