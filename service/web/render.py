"""Server-rendered pages: the Jinja2 environment, a render helper, and the route class that turns errors into pages.

Dashboard routes use `WebRoute`: a domain error (another team's id, a bad value) becomes an
HTML page with its status, or problem+json when the page's script asked for JSON; a
missing session becomes a redirect to /signin. The /v1 API keeps its own handlers.

Errors caught here never reach the session dependency (service.deps.get_session), which
then commits: so every error page first rolls back the request's session, here, in one
place. A route that catches an expected error itself to answer with its form again rolls
back before it reads for the form (jobs.py).
"""

import json
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from starlette.concurrency import run_in_threadpool

from service.problems import domain_problem, problem
from service.web.auth import CsrfRejected, SignInRequired, WebSession, web_session
from service.web.tokens import visible
from tokenmill.errors import TokenmillError

PACKAGE = Path(__file__).resolve().parent.parent
TEMPLATES = PACKAGE / "templates"
STATIC = PACKAGE / "static"

# Everything the pages load comes from this origin: no CDN, no inline script or style.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
                               "object-src 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def human_bytes(size: int | float | None) -> str:
    """1.5 MB, 820 B: sizes for people (decimal units)."""
    if size is None:
        return "–"
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def number(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.{digits}f}"


def percent(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{100 * value:.{digits}f} %"


def plain(value: Any) -> str:
    """A spec or lineage value as JSON would write it (lists, null, true), without HTML escapes."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(bytes=human_bytes, number=number, percent=percent, plain=plain, glyphs=visible)
    return env


templates = Jinja2Templates(env=_environment())


def render(request: Request, name: str, web: WebSession | None, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page from a template, with the security headers every dashboard page carries."""
    response = templates.TemplateResponse(request, name, {"web": web, **context}, status_code=status_code)
    response.headers.update(SECURITY_HEADERS)
    return response


def error_page(request: Request, status: int, title: str, detail: str, web: WebSession | None = None) -> HTMLResponse:
    """An error as a page of the dashboard (with its header and links when the visitor is signed in)."""
    return render(request, "error.html", web, status_code=status, status=status, title=title, detail=detail)


def not_found(request: Request, web: WebSession | None) -> Response:
    """A 404 for a dashboard path nothing answers: a page, or problem+json for the page's script."""
    return _failure(request, 404, "Not found", f"Nothing lives at {request.url.path}.", web=web)


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def see_other(url: str) -> RedirectResponse:
    """The redirect after a successful POST (303: the browser follows it with a GET)."""
    return RedirectResponse(url, status_code=303)


def _signin_redirect(request: Request) -> Response:
    if wants_json(request):
        return problem(401, "Unauthorized", "sign in first", instance=request.url.path)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return see_other("/signin" + (f"?next={quote(target, safe='')}" if request.method == "GET" else ""))


def _failure(request: Request, status: int, title: str, detail: str, field: str | None = None,
             web: WebSession | None = None) -> Response:
    if wants_json(request):
        return problem(status, title, detail, field=field, instance=request.url.path)
    return error_page(request, status, title, detail, web)


class WebRoute(APIRoute):
    """A dashboard route: errors become pages, a missing session a redirect to /signin."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except BaseException as exc:
                await run_in_threadpool(_roll_back, request)  # a database round trip: off the event loop
                if (page := _page_for(request, exc)) is None:
                    raise
                return page

        return handle


def _page_for(request: Request, exc: BaseException) -> Response | None:
    """What a dashboard answers for an error, or None for an error it does not expect (a 500)."""
    if isinstance(exc, SignInRequired):
        return _signin_redirect(request)
    if isinstance(exc, CsrfRejected):
        return _failure(request, 403, "Forbidden", "The form was missing its security token or it has expired: "
                        "reload the page and try again.")
    if isinstance(exc, RequestValidationError):
        if any(error["loc"][:1] == ("path",) for error in exc.errors()):
            return not_found(request, _signed_in(request))
        return _failure(request, 400, "Bad request", "; ".join(str(e["msg"]) for e in exc.errors()), web=_signed_in(request))
    if isinstance(exc, TokenmillError):
        if wants_json(request):
            return domain_problem(request, exc)
        return error_page(request, exc.status, exc.title, exc.detail, _signed_in(request))
    return None


def _signed_in(request: Request) -> WebSession | None:
    """The visitor's session, for an error page's header; None when there is none (or it cannot be read)."""
    try:
        return web_session(request)
    except Exception:  # no session, or the database that failed the page: the page goes out without the header
        return None


def _roll_back(request: Request) -> None:
    """Undo what the failed route wrote in the request's session (see service.deps.get_session)."""
    session = getattr(request.state, "session", None)
    if session is not None:
        session.rollback()
