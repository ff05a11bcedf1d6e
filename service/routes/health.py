"""GET /healthz: 200 when the database, the broker and the store all answer."""

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(request: Request):
    state = request.app.state
    checks = {}
    for name, probe in (
        ("database", lambda: _database(state.sessionmaker)),
        ("broker", state.queue.ping),
        ("store", state.store.ping),
    ):
        try:
            probe()
            checks[name] = "ok"
        except Exception as exc:  # a health check reports every failure, whatever its type
            checks[name] = f"error: {type(exc).__name__}: {exc}"[:300]
    healthy = all(value == "ok" for value in checks.values())
    return JSONResponse({"status": "ok" if healthy else "unavailable", "checks": checks},
                        status_code=200 if healthy else 503)


def _database(factory) -> None:
    with factory() as session:
        session.execute(text("SELECT 1"))
