"""Fixtures. Unit tests use none of the services; the others get real ones (see services.py)."""

import uuid

import pytest
from fastapi.testclient import TestClient

from tests import services
from tests.stack import stack  # noqa: F401  (one API + worker pair for the e2e and browser suites)
from tokenmill.db import make_engine, make_sessionmaker, transaction
from tokenmill.settings import Settings
from tokenmill.store import open_store
from tokenmill.teams import create_team

# The suites in the order they run. The API and integration tests submit work that nothing runs and
# leave it queued in the run's database, where a stack's worker would start it, in turn, before its
# own; so every suite that runs a worker (faults, browser, e2e) comes after them, and each stack
# settles what it finds left (tests/stack.py). The fault tests, one long file, go before the
# browser and e2e files so that those fill the other process meanwhile. With pytest-xdist each
# process keeps this order among the files it is given (`make test` runs `-n 2 --dist loadfile
# --no-loadscope-reorder`: xdist would otherwise hand out the largest files first).
SUITE_ORDER = ("unit", "api", "integration", "faults", "browser", "e2e", "neighbours")


def pytest_collection_modifyitems(config, items):
    def suite(item) -> int:
        parts = item.nodeid.split("/")
        name = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
        return SUITE_ORDER.index(name) if name in SUITE_ORDER else len(SUITE_ORDER)

    items.sort(key=suite)  # stable: each suite keeps its own order


@pytest.fixture(scope="session")
def database_url():
    with services.postgres_database() as url:
        yield url


@pytest.fixture(scope="session")
def broker_url():
    with services.redis_server() as url:
        yield url


@pytest.fixture(scope="session")
def s3_endpoint():
    with services.s3_server() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def settings(database_url, broker_url, s3_endpoint) -> Settings:
    bucket = "tokenmill-test"
    services.make_bucket(s3_endpoint, bucket)
    return Settings(
        database_url=database_url,
        broker_url=broker_url,
        storage_url=f"s3://{bucket}/run-{uuid.uuid4().hex[:8]}",
        s3_endpoint_url=s3_endpoint,
        secret_key=services.SECRET_KEY,
        rate_burst=100,  # tests that encode many texts with one key stay under it; tests of the rate set theirs
    )


@pytest.fixture(scope="session")
def sessionmaker(settings):
    engine = make_engine(settings.database_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture(scope="session")
def store(settings):
    return open_store(settings.storage_url, settings.s3_endpoint_url)


def make_team(sessionmaker):
    """A new team and its API key."""
    with transaction(sessionmaker) as session:
        return create_team(session, f"team-{uuid.uuid4().hex[:8]}")


@pytest.fixture
def team_key(sessionmaker):
    return make_team(sessionmaker)



@pytest.fixture(scope="session")
def app_client(settings):
    from service.app import create_app

    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def api(app_client, team_key):
    """A test client authenticated as a new team."""
    _, key = team_key
    app_client.headers["Authorization"] = f"Bearer {key}"
    yield app_client
    app_client.headers.pop("Authorization", None)
