"""GET /healthz: 200 when the database, the broker and the store all answer.

A failing check answers a generic reason; what failed and where (hosts, URLs, the
exception's text) goes to the log, never to the caller.
"""

import logging
from typing import Any

from fastapi import APIRouter, Request, Response
from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from service.schemas import HealthOut

log = logging.getLogger(__name__)

router = APIRouter(tags=["health"])

UNAVAILABLE = "unavailable"


@router.get("/healthz", response_model=HealthOut, responses={503: {"model": HealthOut, "description": "a check failed"}})
def healthz(request: Request, response: Response) -> dict[str, Any]:
    state = request.app.state
    checks: dict[str, str] = {}
    for name, probe in (
        ("database", lambda: _database(state.health_sessionmaker)),
        ("broker", state.queue.ping),
        ("store", state.store.ping),
    ):
        try:
            probe()
            checks[name] = "ok"
        except Exception as exc:  # a health check reports every failure, whatever its type
            log.warning("health check %s failed: %s: %s", name, type(exc).__name__, exc)
            checks[name] = UNAVAILABLE
    healthy = all(value == "ok" for value in checks.values())
    response.status_code = 200 if healthy else 503
    return {"status": "ok" if healthy else UNAVAILABLE, "checks": checks}


def _database(factory: sessionmaker[Session]) -> None:
    with factory() as session:
        session.execute(text("SELECT 1"))
