"""A file download whose store read fails never looks like success: before the headers it is a
503 problem+json; after them the connection drops short of the announced Content-Length.

The API process reaches S3 through a TCP proxy the test cuts (the shared S3 server stays up).
"""

import time
from urllib.parse import urlparse

import httpx
import pytest

from tests.faults.proxy import proxy_to
from tests.integration.served import add_version
from tests.stack import api_process
from tokenmill.db import transaction
from tokenmill.teams import create_team
from tokenmill.training.spec import resolve_spec

BIG = 48 * 1024**2  # far more than the socket buffers between S3, the API and the client hold


@pytest.fixture(scope="module")
def s3_proxy(settings):
    endpoint = urlparse(settings.s3_endpoint_url)
    with proxy_to(endpoint.hostname, endpoint.port) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def client(settings, sessionmaker, store, s3_proxy, tmp_path_factory):
    """A client of a team with version 1 of "files": a small tokenizer.json and a large big.bin."""
    with transaction(sessionmaker) as session:
        team, key = create_team(session, f"downloads-{time.monotonic_ns()}")
    files = {"tokenizer.json": b'{"small": true}', "big.bin": bytes(range(256)) * (BIG // 256)}
    add_version(sessionmaker, store, team, "files", resolve_spec({}), files, 32000)
    log = tmp_path_factory.mktemp("downloads") / "api.log"
    with (api_process(settings, log, TOKENMILL_S3_ENDPOINT_URL=s3_proxy.url_for(settings.s3_endpoint_url)) as base,
          httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as http):
        yield http


def test_a_whole_file_downloads_when_the_store_answers(client):
    response = client.get("/v1/tokenizers/files/versions/1/files/big.bin")
    assert response.status_code == 200
    assert len(response.content) == int(response.headers["content-length"]) == BIG


def test_the_store_down_before_the_headers_is_a_503_problem(client, s3_proxy):
    s3_proxy.cut()
    try:
        response = client.get("/v1/tokenizers/files/versions/1/files/tokenizer.json")
    finally:
        s3_proxy.restore()
    assert response.status_code == 503, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert int(response.headers["retry-after"]) > 0
    assert client.get("/v1/tokenizers/files/versions/1/files/tokenizer.json").content == b'{"small": true}'


def test_the_store_lost_mid_download_drops_the_connection(client, s3_proxy):
    received = 0
    try:
        with (pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
              client.stream("GET", "/v1/tokenizers/files/versions/1/files/big.bin") as response):
            assert response.status_code == 200
            assert int(response.headers["content-length"]) == BIG
            for chunk in response.iter_bytes():
                received += len(chunk)
                if received >= 1024**2:
                    s3_proxy.cut()  # the API's S3 connection closes after one MiB has reached us
    finally:
        s3_proxy.restore()
    assert 1024**2 <= received < BIG
