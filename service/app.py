"""The FastAPI application factory; long-lived clients are built in the lifespan."""

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service import problems, web
from service.queue import Queue
from service.routes import corpora, evaluations, health, jobs, tokenizers
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.settings import DEVELOPMENT_SECRET, Settings, get_settings
from tokenmill.store import open_store

log = logging.getLogger(__name__)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A Tokenmill API wired to the database, broker and store the settings name."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        if settings.secret_key.get_secret_value() == DEVELOPMENT_SECRET:
            log.warning("TOKENMILL_SECRET_KEY is not set: dashboard cookies are signed with a public development key")
        engine = make_engine(settings.database_url)
        app.state.sessionmaker = make_sessionmaker(engine)
        app.state.store = open_store(settings.storage_url, settings.s3_endpoint_url)
        app.state.queue = Queue(settings)
        app.state.settings = settings
        yield
        app.state.queue.close()
        engine.dispose()

    app = FastAPI(title="Tokenmill", version="0.1.0", lifespan=lifespan,
                  description="Train, version and evaluate tokenizers.")
    problems.install(app)
    for module in (health, corpora, jobs, tokenizers, evaluations):
        app.include_router(module.router)
    app.mount("/static", web.static_files(), name="static")
    app.include_router(web.router)
    return app
