"""The bare endpoint of benchmarks.metadata_load: FastAPI and SQLAlchemy and nothing of Tokenmill's
service, doing what `GET /v1/corpora` does (hash the bearer key, look its team up, count and list
the team's newest corpora, written as JSON by `json.dumps`). What a metadata route could cost on this machine, for the
service's routes to be measured against in the same run.

    TOKENMILL_DATABASE_URL=postgresql+psycopg://… .venv/bin/python -m uvicorn benchmarks.bare_api:create_app --factory
"""

import hashlib
import json
import os

from fastapi import FastAPI, Header, HTTPException, Response
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import sessionmaker

from tokenmill.models import ApiKey, Corpus, Team

COLUMNS = ("id", "name", "domain", "language", "format", "text_field", "parallel_group", "bytes", "lines", "words",
           "characters", "sha256", "statistics", "statistics_error", "created_at")


def create_app() -> FastAPI:
    engine = create_engine(os.environ["TOKENMILL_DATABASE_URL"], pool_size=20, max_overflow=20)
    factory = sessionmaker(engine)
    app = FastAPI()

    @app.get("/v1/corpora")
    def list_corpora(authorization: str = Header()):
        key_hash = hashlib.sha256(authorization.removeprefix("Bearer ").encode()).hexdigest()
        with factory() as session:
            team = session.scalar(select(Team).join(ApiKey, ApiKey.team_id == Team.id)
                                  .where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None)))
            if team is None:
                raise HTTPException(401)
            query = select(Corpus).where(Corpus.team_id == team.id)
            total = session.scalar(select(func.count()).select_from(query.subquery()))
            rows = session.scalars(query.order_by(Corpus.created_at.desc()).limit(50))
            items = [{name: getattr(row, name) for name in COLUMNS} for row in rows]
        body = json.dumps({"items": items, "total": total, "page": 1, "limit": 50}, default=str)
        return Response(body, media_type="application/json")

    return app
