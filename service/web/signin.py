"""Signing in with an API key (a new session row), and signing out (the row ends, server-side)."""

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from service.deps import SessionDep, SessionmakerDep
from service.web import auth
from service.web.auth import FormDep, WebSessionDep
from service.web.render import WebRoute, render, see_other
from tokenmill.db import transaction
from tokenmill.errors import Unauthorized
from tokenmill.teams import authenticate, end_web_session, start_web_session

router = APIRouter(route_class=WebRoute, include_in_schema=False)


def _signin_form(request: Request, next_url: str, error: str | None = None,
                 status_code: int = 200) -> HTMLResponse:
    nonce = auth.new_signin_nonce()
    response = render(request, "signin.html", None, status_code=status_code, nonce=nonce, next_url=next_url, error=error)
    auth.set_cookie(request, response, auth.SIGNIN_COOKIE, nonce, max_age=3600)
    return response


@router.get("/signin")
def signin_page(request: Request, next_url: Annotated[str | None, Query(alias="next")] = None) -> HTMLResponse:
    return _signin_form(request, auth.safe_next(next_url))


@router.post("/signin")
def signin(
    request: Request,
    session: SessionDep,
    api_key: Annotated[str, Form()] = "",
    nonce: Annotated[str, Form()] = "",
    next_url: Annotated[str, Form(alias="next")] = "/",
) -> Response:
    target = auth.safe_next(next_url)
    if not auth.signin_nonce_matches(request, nonce):
        return _signin_form(request, target, "The sign-in form expired: please try again.", status_code=403)
    try:
        team = authenticate(session, api_key.strip())
    except Unauthorized:
        return _signin_form(request, target, "That API key is unknown or has been revoked.", status_code=401)
    row = start_web_session(session, team, api_key.strip())
    session.commit()  # the browser follows the redirect at once: the row must be there
    response = see_other(target)
    value = auth.session_cookie_value(request.app.state.settings, row.id)
    auth.set_cookie(request, response, auth.SESSION_COOKIE, value, max_age=auth.SESSION_SECONDS)
    auth.clear_cookie(request, response, auth.SIGNIN_COOKIE)
    return response


@router.post("/signout")
def signout(request: Request, form: FormDep, web: WebSessionDep, factory: SessionmakerDep) -> RedirectResponse:
    with transaction(factory) as session:
        end_web_session(session, web.id)
    response = see_other("/signin")
    auth.clear_cookie(request, response, auth.SESSION_COOKIE)
    return response
