"""Dashboard sessions: a signed cookie holding the API key's hash, and CSRF tokens derived from it.

The cookie carries the SHA-256 of the API key (never the key), signed with itsdangerous
under `settings.secret_key`. Every request looks that hash up again, so a revoked key
signs its sessions out at once. The CSRF token of a session is an HMAC of the same hash:
stable for the session, unguessable without the secret, and checked on every web POST
(a hidden form field, or the X-CSRF-Token header for the page's script). Signing in has no
session yet, so its form is protected by a double-submit cookie instead.
"""

import hashlib
import hmac
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.responses import Response
from itsdangerous import BadSignature, URLSafeTimedSerializer
from starlette.datastructures import FormData

from service.deps import SessionDep
from tokenmill.models import Team
from tokenmill.settings import Settings
from tokenmill.teams import team_by_key_hash

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
    """The signed-in team and the CSRF token its forms carry."""

    team: Team
    csrf_token: str

    def accepts(self, token: str | None) -> bool:
        return bool(token) and hmac.compare_digest(str(token), self.csrf_token)


def _secret(settings: Settings) -> str:
    return settings.secret_key.get_secret_value()


def _serializer(settings: Settings) -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(_secret(settings), salt="tokenmill.web.session")


def csrf_token(settings: Settings, key_hash: str) -> str:
    """The session's CSRF token: an HMAC of the key hash under the secret key."""
    return hmac.new(_secret(settings).encode(), f"csrf:{key_hash}".encode(), hashlib.sha256).hexdigest()


def session_cookie_value(settings: Settings, key_hash: str) -> str:
    return _serializer(settings).dumps(key_hash)


def set_cookie(request: Request, response: Response, name: str, value: str, max_age: int) -> None:
    """HttpOnly, SameSite=Strict, and Secure whenever the page was served over https."""
    response.set_cookie(name, value, max_age=max_age, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/")


def clear_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(name, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")


def web_session(request: Request, session: SessionDep) -> WebSession:
    """The session a signed cookie names, if its API key is still live."""
    settings: Settings = request.app.state.settings
    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        raise SignInRequired()
    try:
        key_hash = _serializer(settings).loads(cookie, max_age=SESSION_SECONDS)
    except BadSignature:
        raise SignInRequired() from None
    team = team_by_key_hash(session, str(key_hash))
    if team is None:
        raise SignInRequired()
    return WebSession(team=team, csrf_token=csrf_token(settings, str(key_hash)))


WebSessionDep = Annotated[WebSession, Depends(web_session)]


async def checked_form(request: Request, web: WebSessionDep) -> AsyncIterator[FormData]:
    """The posted form, once its CSRF field matches the session's token; uploaded files are closed afterwards."""
    form = await request.form()
    try:
        token = form.get(CSRF_FIELD)
        if not web.accepts(token if isinstance(token, str) else None):
            raise CsrfRejected()
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
    return bool(cookie) and bool(posted) and hmac.compare_digest(cookie, str(posted))


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a local path only, never another site."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"
