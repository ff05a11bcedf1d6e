"""Dashboard sessions: a signed cookie naming a session row, and CSRF tokens derived from it.

Signing in creates a `web_sessions` row (team, SHA-256 of the API key used); the cookie
carries the row's id (never the key), signed with itsdangerous under `settings.secret_key`.
Every request looks the row up again in a short session of its own (closed before the
route reads a form, so a slow upload holds no database connection): signing out ends the
row for good, and a revoked key ends every session signed in with it at once. The CSRF
token of a session is an HMAC of its id: stable for the session, unguessable without the
secret, and checked on every web POST (a hidden form field, or the X-CSRF-Token header for
the page's script). Signing in has no session yet, so its form is protected by a
double-submit cookie instead.
"""

import hashlib
import hmac
import secrets
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.datastructures import FormData

from service.inputs import check_values
from tokenmill.models import Team
from tokenmill.settings import Settings
from tokenmill.teams import web_session_team

SESSION_COOKIE = "tokenmill_session"
SIGNIN_COOKIE = "tokenmill_signin"
SESSION_SECONDS = 7 * 24 * 3600
CSRF_FIELD = "csrf_token"


class SignInRequired(Exception):
    """No valid session: pages redirect to /signin, scripts get a 401."""


class CsrfRejected(Exception):
    """A web POST without the session's CSRF token."""


@dataclass(frozen=True)
class WebSession:
    """The signed-in team, the session's row id and the CSRF token its forms carry."""

    id: uuid.UUID
    team: Team
    csrf_token: str

    def accepts(self, token: str | None) -> bool:
        return bool(token) and same_secret(str(token), self.csrf_token)


def same_secret(given: str, expected: str) -> bool:
    """A constant-time comparison that also takes what a client made up (non-ASCII, surrogates)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass"))


def _secret(settings: Settings) -> str:
    return settings.secret_key.get_secret_value()


def _serializer(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(settings), salt="tokenmill.web.session")


def csrf_token(settings: Settings, session_id: uuid.UUID) -> str:
    """The session's CSRF token: an HMAC of its id under the secret key."""
    return hmac.new(_secret(settings).encode(), f"csrf:{session_id}".encode(), hashlib.sha256).hexdigest()


def session_cookie_value(settings: Settings, session_id: uuid.UUID) -> str:
    return _serializer(settings).dumps(str(session_id))


def _cookie_session_id(settings: Settings, cookie: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(_serializer(settings).loads(cookie, max_age=SESSION_SECONDS)))
    except (BadSignature, ValueError):  # tampered, expired, or from before sessions had rows
        raise SignInRequired() from None


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    """HttpOnly, SameSite=Strict, and Secure whenever the page was served over https."""
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(name, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")


def web_session(request: Request) -> WebSession:
    """The session a signed cookie names, if it has not ended and its API key is still live."""
    settings: Settings = request.app.state.settings
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise SignInRequired()
    session_id = _cookie_session_id(settings, cookie)
    with request.app.state.sessionmaker() as session:
        team = web_session_team(session, session_id)
    if team is None:
        raise SignInRequired()
    return WebSession(id=session_id, team=team, csrf_token=csrf_token(settings, session_id))


WebSessionDep = Annotated[WebSession, Depends(web_session)]


async def checked_form(request: Request, web: WebSessionDep) -> AsyncIterator[FormData]:
    """The posted form, once its CSRF field matches the session's token; uploaded files are closed afterwards."""
    form = await request.form()
    try:
        token = form.get(CSRF_FIELD)
        if not web.accepts(token if isinstance(token, str) else None):
            raise CsrfRejected()
        check_values((name, value) for name, value in form.multi_items() if isinstance(value, str))
        yield form
    finally:
        await form.close()


def checked_script(web: WebSessionDep, x_csrf_token: Annotated[str | None, Header()] = None) -> WebSession:
    """The session, for a script's POST carrying the CSRF token in X-CSRF-Token."""
    if not web.accepts(x_csrf_token):
        raise CsrfRejected()
    return web


FormDep = Annotated[FormData, Depends(checked_form)]
ScriptSessionDep = Annotated[WebSession, Depends(checked_script)]


def new_signin_nonce() -> str:
    """A random value for the sign-in form's double-submit cookie."""
    return secrets.token_urlsafe(24)


def signin_nonce_matches(request: Request, posted: str | None) -> bool:
    cookie = request.cookies.get(SIGNIN_COOKIE)
    if not cookie or not posted:
        return False
    return same_secret(str(posted), cookie)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a local path only, never another site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"
