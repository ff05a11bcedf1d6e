"""The FastAPI application factory; long-lived clients are built in the lifespan."""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI

from service import logs, problem_docs, problems, web
from service.admission import Admission, FairTurns
from service.inputs import check_request_values
from service.metrics import Metrics
from service.middleware import UPLOAD_PATHS, Authentication, BodyLimit, Telemetry
from service.queue import Queue
from service.rate_limits import TokenBuckets
from service.routes import bpe, corpora, evaluations, health, jobs, metrics, team, tokenizers
from service.uploads import UploadsInFlight
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.playground import cost_report
from tokenmill.sandboxed import sandbox
from tokenmill.settings import DEVELOPMENT_SECRET, Settings, get_settings
from tokenmill.store import open_store

log = logging.getLogger(__name__)

# Secrets anyone can read: the settings' default, and the one docker-compose.yml used to default to.
PUBLIC_SECRETS = frozenset({DEVELOPMENT_SECRET, "change-me", ""})


class InsecureSecretKey(RuntimeError):
    """The API would sign dashboard cookies with a secret anyone knows."""


def check_secret_key(settings: Settings) -> None:
    """Refuse a public secret key, except on SQLite (the embedded, one-machine mode), where a warning does."""
    if settings.secret_key.get_secret_value() not in PUBLIC_SECRETS:
        return
    if settings.database_url.startswith("sqlite"):
        log.warning("TOKENMILL_SECRET_KEY is not set: dashboard cookies are signed with a public development key")
        return
    raise InsecureSecretKey(
        "TOKENMILL_SECRET_KEY is unset or a public default, so anyone could forge dashboard sessions: set it to a "
        "long random value, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'")


def create_app(settings: Settings | None = None) -> FastAPI:
    """A Tokenmill API wired to the database, broker and store the settings name."""
    settings = settings or get_settings()
    logs.install()  # before anything logs: uvicorn calls this factory before its first line
    check_secret_key(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url, settings.api_database_pool_size, settings.api_database_max_overflow,
                             settings.api_database_pool_timeout)
        app.state.sessionmaker = make_sessionmaker(engine)
        # /healthz asks the database over a connection of its own: a pool busy with requests is load, not an outage.
        health_engine = make_engine(settings.database_url, pool_size=1, max_overflow=1)
        app.state.health_sessionmaker = make_sessionmaker(health_engine)
        app.state.store = open_store(settings.storage_url, settings.s3_endpoint_url)
        app.state.queue = Queue(settings)
        app.state.settings = settings
        app.state.rate_limits = TokenBuckets(settings.rate_burst)
        app.state.quota_cache = {}
        app.state.uploads = UploadsInFlight()
        sandbox.start(settings.encode_timeout_seconds)  # warm encode processes before the first request
        cost_report.warm_up()  # the references' ranks, parsed before the first request instead of in it
        yield
        sandbox.close()
        app.state.queue.close()
        engine.dispose()
        health_engine.dispose()

    app = FastAPI(title="Tokenmill", version="0.1.0", lifespan=lifespan,
                  description="Train, version and evaluate tokenizers.",
                  dependencies=[Depends(check_request_values)])
    problems.install(app)
    app.state.metrics = Metrics(app.state) if settings.metrics_enabled else None
    # The last added runs first: give the request its id and start its clock, wait for a slot,
    # authenticate, then cap the body, before any route reads it.
    app.add_middleware(BodyLimit, settings=settings)
    app.add_middleware(Authentication)
    app.state.turns = FairTurns(settings.api_concurrent_requests, settings.api_waiting_per_caller)
    app.add_middleware(Admission, turns=app.state.turns, wait_seconds=settings.api_admission_wait_seconds,
                       upload_paths=UPLOAD_PATHS)
    app.add_middleware(Telemetry, metrics=app.state.metrics)
    for module in (health, team, corpora, jobs, tokenizers, evaluations, bpe):
        app.include_router(module.router)
    if settings.metrics_enabled:  # otherwise GET /metrics is a 404 like any path without a route
        app.include_router(metrics.router)
    app.mount("/static", web.static_files(), name="static")
    app.include_router(web.router)
    problem_docs.document(app)
    return app
