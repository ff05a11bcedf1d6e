"""The team's quotas on every upload, API and dashboard alike: corpora, storage (counted as the file streams),
concurrent uploads and the request rate. Each refusal is problem+json naming the quota, and leaves nothing stored."""

import io
import threading
from dataclasses import replace

import httpx
import pytest
import zstandard

from tests.api.dashboard import sign_in
from tests.api.test_corpora import PROBLEM
from tests.api.test_slow_uploads import multipart
from tests.api.uploading import post_api, post_dashboard, signed_in, stored
from tests.conftest import make_team
from tests.services import wait_for
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.corpora.reading import decompressed
from tokenmill.db import transaction
from tokenmill.errors import InvalidCorpus, OverQuota, TooLarge
from tokenmill.quotas import Quotas, set_quotas
from tokenmill.store import CHUNK

MiB = 1024**2


def limit(sessionmaker, team, **figures: int) -> None:
    """Set the team's quotas (before its first upload: the API trusts what it read for a few seconds)."""
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, figures)


def over(response, quota: str, limit: int, used: int) -> dict:
    assert response.status_code == 409, response.text[:300]
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert (problem["quota"], problem["limit"], problem["used"]) == (quota, limit, used), problem
    assert quota in problem["detail"]
    return problem


@pytest.fixture
def browser(app_client, api):
    return signed_in(app_client, api)


def zstd_bomb(size: int) -> bytes:
    """A few kilobytes of zstd holding `size` bytes of one short line, over and over."""
    line = b"the same short line, again and again\n"
    return zstandard.ZstdCompressor(level=19).compress(line * (size // len(line)))


def test_the_corpora_quota_refuses_one_more_on_both_faces(api, browser, store, sessionmaker, team_key):
    team = team_key[0]
    limit(sessionmaker, team, corpora=2)
    first = post_api(api, b"one\n", "a.txt", {}).json()
    post_dashboard(browser, b"two\n", "b.txt", {})
    before = stored(store, sessionmaker, team.id)
    assert before[2] == 2
    over(post_api(api, b"three\n", "c.txt", {}), "corpora", 2, 2)
    over(post_dashboard(browser, b"three\n", "c.txt", {}), "corpora", 2, 2)
    page = post_dashboard(browser, b"three\n", "c.txt", {}, as_json=False)
    assert page.status_code == 409 and "quota corpora" in page.text
    assert stored(store, sessionmaker, team.id) == before
    assert api.delete(f"/v1/corpora/{first['id']}").status_code == 204
    assert post_api(api, b"three\n", "c.txt", {}).status_code == 201  # what the team holds now, not what it sent


def test_the_storage_quota_counts_decompressed_bytes_up_to_the_limit(api, store, sessionmaker, team_key):
    team = team_key[0]
    limit(sessionmaker, team, storage_bytes=1000)
    assert post_api(api, b"x" * 599 + b"\n", "a.txt", {}).status_code == 201
    before = stored(store, sessionmaker, team.id)
    problem = over(post_api(api, zstandard.ZstdCompressor().compress(b"y" * 600 + b"\n"), "b.zst", {}),
                   "storage_bytes", 1000, 600)
    assert "400 left" in problem["detail"]
    assert stored(store, sessionmaker, team.id) == before
    assert post_api(api, b"z" * 399 + b"\n", "c.txt", {}).status_code == 201  # exactly the limit
    over(post_api(api, b"\n\n\nw\n", "d.txt", {}), "storage_bytes", 1000, 1000)  # refused before a byte is read


def test_a_dashboard_zstd_bomb_stops_at_the_storage_quota(browser, store, sessionmaker, team_key):
    team = team_key[0]
    limit(sessionmaker, team, storage_bytes=MiB)
    bomb = zstd_bomb(64 * MiB)
    assert len(bomb) < 16 * 1024
    over(post_dashboard(browser, bomb, "bomb.txt.zst", {}), "storage_bytes", MiB, 0)
    assert stored(store, sessionmaker, team.id) == (set(), 0, 0)


def test_the_storage_quota_is_checked_as_the_file_streams(browser, store, sessionmaker, team_key):
    # The bomb, then a frame with whole headers but a corrupt body: read to its end, the upload
    # would be refused as corrupt (422); stopped at the quota, it is a 409 before reaching it.
    team = team_key[0]
    limit(sessionmaker, team, storage_bytes=MiB)
    tail = bytearray(zstandard.ZstdCompressor(write_checksum=True).compress(b"a tail line\n" * 1000))
    tail[len(tail) // 2:len(tail) // 2 + 4] = bytes(4)
    upload = zstd_bomb(64 * MiB) + bytes(tail)
    with pytest.raises(InvalidCorpus, match="corrupt zstd data"):
        for _ in decompressed([upload]):
            pass
    over(post_dashboard(browser, upload, "bomb.txt.zst", {}), "storage_bytes", MiB, 0)
    assert stored(store, sessionmaker, team.id) == (set(), 0, 0)


@pytest.mark.parametrize(("max_bytes", "storage_bytes", "refusal"), [
    (10_000, 20_000, TooLarge),  # the global cap is smaller: 413, as before
    (20_000, 10_000, OverQuota),  # the team's room is smaller: 409
])
def test_the_smaller_cap_speaks(settings, sessionmaker, store, team_key, max_bytes, storage_bytes, refusal):
    team = team_key[0]
    quotas = replace(Quotas.defaults(settings), storage_bytes=storage_bytes)
    with pytest.raises(refusal):
        ingest_corpus(sessionmaker, store, team, CorpusFields("c", "news", "en"), [b"a line\n" * 5000],
                      max_bytes=max_bytes, max_line_bytes=CHUNK, quotas=quotas)
    assert stored(store, sessionmaker, team.id) == (set(), 0, 0)


def spend_api(api, browser) -> int:
    return api.post("/v1/corpora", content=b"x", headers={"Content-Type": "text/plain"}).status_code


def spend_dashboard(api, browser) -> int:
    headers = {"Content-Type": "text/plain", "Accept": "application/json"}
    return browser[0].post("/corpora", content=b"x", headers=headers).status_code


@pytest.mark.parametrize(("spend", "face"), [(spend_api, post_api), (spend_dashboard, post_dashboard)],
                         ids=["api", "dashboard"])
def test_uploads_spend_the_request_rate(api, browser, store, sessionmaker, team_key, settings, spend,
                                        face):
    team = team_key[0]
    limit(sessionmaker, team, requests_per_minute=1)
    # Bodies that are no upload at all: refused (422), but each took its token first.
    assert [spend(api, browser) for _ in range(settings.rate_burst)] == [422] * settings.rate_burst
    refused = face(browser if face is post_dashboard else api, b"a good line\n", "c.txt", {})
    assert refused.status_code == 429, refused.text[:300]
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["quota"] == "requests_per_minute" and int(refused.headers["retry-after"]) >= 1
    assert stored(store, sessionmaker, team.id) == (set(), 0, 0)


# --- uploads at once, on a real API process -----------------------------------------------------


def held_upload(base: str, key: str, release: threading.Event, index: int) -> int:
    """An upload whose client sends the fields and most of the file, then waits for `release` to send the rest."""
    body, content_type = multipart({"name": f"held-{index}", "domain": "web", "language": "en"},
                                   b"a line of a held upload\n" * 2000)
    cut = len(body) - 1000

    def content():
        yield body[:cut]
        release.wait(120)
        yield body[cut:]

    with httpx.Client(base_url=base, timeout=120) as client:
        return client.post("/v1/corpora", content=content(),
                           headers={"Authorization": f"Bearer {key}", "Content-Type": content_type}).status_code


def test_a_third_upload_at_once_is_refused_on_both_faces(served_api, sessionmaker):
    team, key = make_team(sessionmaker)
    limit(sessionmaker, team, concurrent_uploads=2)
    release, statuses = threading.Event(), []
    held = [threading.Thread(target=lambda i=i: statuses.append(held_upload(served_api, key, release, i)))
            for i in range(2)]
    headers = {"Authorization": f"Bearer {key}"}
    try:
        for thread in held:
            thread.start()
        wait_for(lambda: httpx.get(f"{served_api}/v1/team", headers=headers).json()["usage"]["uploads_in_flight"] == 2,
                 "two uploads in flight")
        third = httpx.post(f"{served_api}/v1/corpora", headers=headers, timeout=30,
                           data={"name": "third", "domain": "web", "language": "en"},
                           files={"file": ("c.txt", io.BytesIO(b"one more\n"))})
        problem = over(third, "concurrent_uploads", 2, 2)
        assert int(third.headers["retry-after"]) >= 1 and "wait" in problem["detail"]
        with httpx.Client(base_url=served_api, timeout=30) as client:
            token = sign_in(client, key)
            fourth = client.post("/corpora", headers={"Accept": "application/json"},
                                 data={"csrf_token": token, "name": "fourth", "domain": "web", "language": "en"},
                                 files={"file": ("c.txt", io.BytesIO(b"one more\n"))})
        over(fourth, "concurrent_uploads", 2, 2)
    finally:
        release.set()
        for thread in held:
            thread.join(120)
    assert statuses == [201, 201]
    listing = httpx.get(f"{served_api}/v1/corpora", headers=headers).json()
    assert sorted(item["name"] for item in listing["items"]) == ["held-0", "held-1"]
    assert httpx.get(f"{served_api}/v1/team", headers=headers).json()["usage"]["uploads_in_flight"] == 0
