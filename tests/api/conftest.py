"""A real API process for the tests that need one: raw sockets, timing, concurrent slow clients.

Its object store sits behind a slow proxy (tests/api/slow_proxy.py), so that an upload spends
seconds streaming to the store, as a large one does against a remote S3.
"""

from urllib.parse import urlparse

import pytest

from tests.api.slow_proxy import SlowProxy
from tests.stack import api_process

STORE_BYTES_PER_SECOND = 64 * 1024


@pytest.fixture(scope="session")
def served_api(settings, tmp_path_factory):
    """Base URL of a `tokenmill serve` process on the test database, with a slow object store."""
    endpoint = urlparse(settings.s3_endpoint_url)
    proxy = SlowProxy(endpoint.hostname, endpoint.port, STORE_BYTES_PER_SECOND)
    log_path = tmp_path_factory.mktemp("served-api") / "api.log"
    try:
        with api_process(settings, log_path, TOKENMILL_S3_ENDPOINT_URL=proxy.url_for(settings.s3_endpoint_url)) as base:
            yield base
    finally:
        proxy.close()
        print("served API log tail:\n" + log_path.read_text(errors="replace")[-3000:])
