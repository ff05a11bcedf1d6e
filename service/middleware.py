"""Pure ASGI middleware at the edge: who is asking, before a byte of the body is read, and how much they may send.

`Authentication` answers every `/v1/` request without a live API key with a 401, without
reading its body; with one, it leaves the team in the request's state for `TeamDep`. The
lookup's session is closed before the route runs, so a route that streams an upload holds
no database connection for it.

`BodyLimit` caps request bodies: a multipart upload at `max_upload_bytes` (plus room for
its form fields), anything else (JSON, forms) at `max_json_body_bytes`. A declared
Content-Length over the cap is refused at once; a chunked body is counted as it arrives
and refused once it passes the cap. Both answer 413 problem+json.
"""

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.problems import DATABASE_UNAVAILABLE, domain_problem, problem, unavailable
from tokenmill.errors import Unauthorized
from tokenmill.models import Team
from tokenmill.settings import Settings
from tokenmill.teams import authenticate, hash_key

API_PREFIX = "/v1/"
TEAM_STATE = "team"
KEY_STATE = "key_hash"  # the SHA-256 of the request's API key: its rate-limit bucket (service/rate_limits.py)


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
        except DATABASE_UNAVAILABLE as exc:
            response = unavailable(request.url.path, "database", exc)
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
