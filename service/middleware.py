"""Pure ASGI middleware at the edge: who is asking, before a byte of the body is read, and how much they may send.

`Authentication` answers every `/v1/` request without a live API key with a 401, without
reading its body; with one, it leaves the team in the request's state for `TeamDep`. The
lookup's session is closed before the route runs, so a route that streams an upload holds
no database connection for it.

`BodyLimit` caps request bodies: a multipart upload at `max_upload_bytes` (plus room for
its form fields), anything else (JSON, forms) at `max_json_body_bytes`. A declared
Content-Length over the cap is refused at once; a chunked body is counted as it arrives
and refused once it passes the cap. Both answer 413 problem+json.

`Telemetry`, outermost, gives every request its id (service/logs.py) and, once it is answered,
counts and times it under its route template (service/metrics.py) and writes its access line;
upload bodies are counted as they arrive. It keeps to a few dictionary lookups and one log
line per request: it runs on every one.
"""

import re
import time
from collections.abc import Iterable

from fastapi.routing import iter_route_contexts
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.logs import REQUEST_ID, access_log, request_id
from service.metrics import UNKNOWN_TEAM, UNMATCHED, Metrics
from service.problems import domain_problem, pool_busy, problem, unavailable
from tokenmill.db import DATABASE_AWAY, POOL_BUSY
from tokenmill.errors import Unauthorized
from tokenmill.models import Team
from tokenmill.settings import Settings
from tokenmill.teams import authenticate, hash_key

API_PREFIX = "/v1/"
TEAM_STATE = "team"
KEY_STATE = "key_hash"  # the SHA-256 of the request's API key: its rate-limit bucket (service/rate_limits.py)
UPLOAD_PATHS = frozenset({"/v1/corpora", "/corpora"})  # POST: the API's and the dashboard's corpus uploads
REQUEST_ID_KEY = b"x-request-id"


def bearer_key(authorization: str | None) -> str | None:
    """The key of an `Authorization: Bearer <key>` header."""
    if not authorization:
        return None
    scheme, _, key = authorization.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else None


def _team_of(request: Request, key: str | None) -> Team:
    with request.app.state.sessionmaker() as session:
        return authenticate(session, key)


class Authentication:
    """/v1/*: look the bearer key up before the body is read; 401 problem+json without a live one."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(API_PREFIX):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            key = bearer_key(request.headers.get("authorization"))
            team = await run_in_threadpool(_team_of, request, key)
        except Unauthorized as exc:
            response = domain_problem(request, exc)
        except DATABASE_AWAY as exc:
            response = unavailable(request.url.path, "database", exc)
        except POOL_BUSY:
            response = pool_busy(request.url.path)
        else:
            state = scope.setdefault("state", {})
            state[TEAM_STATE], state[KEY_STATE] = team, hash_key(key or "")
            await self.app(scope, receive, send)
            return
        await response(scope, receive, send)


def body_limit(settings: Settings, content_type: str) -> int:
    """The most bytes a request body of this content type may hold."""
    if content_type.lower().startswith("multipart/form-data"):
        return settings.max_upload_bytes + settings.max_json_body_bytes
    return settings.max_json_body_bytes


def _too_large(limit: int) -> str:
    return f"the request body exceeds the limit of {limit} bytes"


class BodyLimit:
    """Refuse request bodies over their cap (413), by Content-Length first and by counting otherwise."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        limit = body_limit(self.settings, headers.get("content-type", ""))
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            response = problem(413, "Content Too Large", _too_large(limit), instance=scope["path"])
            await response(scope, receive, send)
            return
        await self.app(scope, _counted(receive, limit), send)


def _counted(receive: Receive, limit: int) -> Receive:
    received = 0

    async def counting_receive() -> Message:
        nonlocal received
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > limit:
                # Raised inside the app's read of the body: its handlers render the 413.
                raise HTTPException(413, _too_large(limit))
        return message

    return counting_receive



class Telemetry:
    """Every request: an id (X-Request-ID, in the logs and problem bodies), its metrics and its access line."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = RouteTemplates()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = request_id(_header(scope, REQUEST_ID_KEY))
        token = REQUEST_ID.set(rid)
        answered = 500  # unless the app starts an answer: an exception escaped it
        id_header = (REQUEST_ID_KEY, rid.encode())

        async def send_with_id(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.start":
                answered = message["status"]
                headers = list(message.get("headers", ()))
                if not any(name == REQUEST_ID_KEY for name, _ in headers):  # problem() may have set it
                    headers.append(id_header)
                message = {**message, "headers": headers}
            await send(message)

        if self.metrics is not None and scope["method"] == "POST" and scope["path"] in UPLOAD_PATHS:
            receive = _upload_counted(receive, scope, self.metrics)
        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            # The id stays set: the 500's handler runs outside this middleware (Starlette's
            # ServerErrorMiddleware) and logs and answers with it. The context is this request's own.
            self._record(scope, answered, started)
            raise
        self._record(scope, answered, started)
        REQUEST_ID.reset(token)

    def _record(self, scope: Scope, status: int, started: float) -> None:
        seconds = time.perf_counter() - started
        route = self.routes.of(scope)
        if self.metrics is not None:
            self.metrics.observe_request(route, scope["method"], status, seconds)
        access_log.info("%s %s %d", scope["method"], scope["path"], status, extra={
            "method": scope["method"], "route": route, "path": scope["path"], "status": status,
            "duration_ms": round(seconds * 1000, 2), "team": _team_name(scope)})


def _header(scope: Scope, name: bytes) -> str | None:
    headers: Iterable[tuple[bytes, bytes]] = scope["headers"]  # the ASGI spec's type
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _team_name(scope: Scope) -> str | None:
    team = scope.get("state", {}).get(TEAM_STATE)
    return team.name if team is not None else None


class RouteTemplates:
    """The path template of the route a request was for, by the route FastAPI chose or, for a request no route
    took (answered at the edge: 401, 413; a static file; no route at all), by matching the app's routes."""

    def __init__(self) -> None:
        self._table: list[tuple[re.Pattern[str], str, frozenset[str]]] | None = None

    def of(self, scope: Scope) -> str:
        route = scope.get("route")
        if route is not None:
            return getattr(route, "path_format", None) or UNMATCHED
        if self._table is None:  # every route exists by the first request
            self._table = [(context.path_regex, context.path_format, frozenset(context.methods or ()))
                           for context in iter_route_contexts(scope["app"].routes)
                           if context.path_format and hasattr(context, "path_regex")]
        candidates = [(template, methods) for regex, template, methods in self._table if regex.match(scope["path"])]
        for template, methods in candidates:
            if not methods or scope["method"] in methods:
                return template
        return candidates[0][0] if candidates else UNMATCHED


def _upload_counted(receive: Receive, scope: Scope, metrics: Metrics) -> Receive:
    counter = None

    async def counting_receive() -> Message:
        nonlocal counter
        message = await receive()
        body = message.get("body")
        if body:
            if counter is None:  # the first bytes come after authentication, so the team is known by then
                counter = metrics.upload_bytes.labels(scope["path"], _team_name(scope) or UNKNOWN_TEAM)
            counter.inc(len(body))
        return message

    return counting_receive
