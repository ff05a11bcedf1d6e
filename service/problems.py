"""RFC 9457 problem+json: every error the API returns, rendered in one place.

Besides the domain errors (tokenmill/errors.py) and FastAPI's validation errors, three
families of faults get an honest answer rather than a bare 500:

- the database or the object store is unreachable: 503 with `Retry-After`;
- a value the database cannot hold (a NUL character, a lone surrogate, an integer out of
  range) slipped past the checks at the edge: 422;
- anything else: 500 with a generic detail. Its traceback and text go to the log only, as
  do the hosts and URLs of the 503s: a tenant never sees them.

Every body carries the request's id (`request_id`, also the X-Request-ID header), the one its
log lines carry (service/logs.py). A refusal at a quota is counted by quota (service/metrics.py).
"""

import logging
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException

from service.logs import REQUEST_ID, REQUEST_ID_HEADER
from tokenmill.db import DATABASE_AWAY, POOL_BUSY
from tokenmill.errors import OverQuota, TokenmillError
from tokenmill.store import TRANSIENT_ERRORS

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_SECONDS = 5


def problem(status: int, title: str, detail: str, headers: Mapping[str, str] | None = None,
            **extra: object) -> JSONResponse:
    body: dict[str, object] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    body.update({key: value for key, value in extra.items() if value is not None})
    headers = dict(headers or {})
    request_id = REQUEST_ID.get()
    if request_id is not None:
        body["request_id"] = request_id
        headers[REQUEST_ID_HEADER] = request_id
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers or None)


def domain_problem(request: Request, exc: TokenmillError) -> JSONResponse:
    """The problem+json of a domain error (also for routes that catch it to answer a form)."""
    count_refusal(request, exc)
    return problem(exc.status, exc.title, exc.detail, headers=exc.headers() or None, field=exc.field,
                   instance=request.url.path, **exc.fields())


def count_refusal(request: Request, exc: TokenmillError) -> None:
    """Count a refusal at a quota (409) or a rate (429) under its quota's name, for GET /metrics; other errors pass."""
    metrics = getattr(request.app.state, "metrics", None)
    if isinstance(exc, OverQuota) and metrics is not None:
        metrics.count_refusal(exc)


def unavailable(path: str, what: str, exc: BaseException) -> JSONResponse:
    """503: `what` ("database", "object store") did not answer; the reason is logged, not shown."""
    log.warning("%s unavailable during %s: %s: %s", what, path, type(exc).__name__, exc)
    return problem(503, "Service unavailable", f"the {what} is not answering; try again in a few seconds",
                   headers={"Retry-After": str(RETRY_AFTER_SECONDS)}, instance=path)


def _database_unavailable(request: Request, exc: Exception) -> JSONResponse:
    return unavailable(request.url.path, "database", exc)


def pool_busy(path: str) -> JSONResponse:
    """503 Busy: the database answers, but this API process has no free connection just now."""
    log.warning("database pool exhausted during %s", path)
    return problem(503, "Busy", "the service is busy: every database connection is in use; try again in a second",
                   headers={"Retry-After": "1"}, instance=path)


def _pool_busy(request: Request, exc: Exception) -> JSONResponse:
    return pool_busy(request.url.path)


def _store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    return unavailable(request.url.path, "object store", exc)


def _unstorable_value(request: Request, exc: Exception) -> JSONResponse:
    # The edge checks (service/inputs.py) name the field; this is the net under them.
    log.info("refused a value the database cannot hold on %s: %s", request.url.path, type(exc).__name__)
    return problem(422, "Invalid input", "a value in the request cannot be stored: it holds a NUL character or "
                   "a lone surrogate, or a number is out of range", instance=request.url.path)


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    log.error("unexpected error %s on %s %s", incident, request.method, request.url.path, exc_info=exc)
    return problem(500, "Internal error", f"something went wrong on our side (incident {incident}); "
                   "it has been logged", instance=request.url.path)


def _field_error(err: dict[str, Any]) -> dict[str, str]:
    if err.get("type") == "json_invalid":
        # loc is ("body", <character position>): name the body, say where it broke.
        position = err["loc"][-1] if len(err["loc"]) > 1 else "?"
        reason = (err.get("ctx") or {}).get("error", "invalid JSON")
        return {"field": "body", "message": f"not valid JSON at character {position}: {reason}"}
    field = ".".join(str(part) for part in err["loc"] if part not in ("body", "query", "path", "header"))
    return {"field": field, "message": err["msg"]}


def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    errors = [_field_error(err) for err in exc.errors()]
    detail = "; ".join(f"{e['field'] or 'body'}: {e['message']}" for e in errors)
    return problem(422, "Invalid input", detail, field=errors[0]["field"] if errors else None,
                   errors=errors, instance=request.url.path)


def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
    try:
        title = HTTPStatus(exc.status_code).phrase
    except ValueError:  # a status outside the standard's list
        title = str(exc.detail)
    headers = exc.headers
    if exc.status_code == 405:  # Starlette's Allow names the methods of the first route of the path only
        headers = {**(headers or {}), "Allow": ", ".join(allowed_methods(request))}
    return problem(exc.status_code, title, str(exc.detail), headers=headers, instance=request.url.path)


def allowed_methods(request: Request) -> list[str]:
    """The methods of every route of the request's path (a path can have a route per method)."""
    path = request.scope["path"]
    return sorted({method for context in iter_route_contexts(request.app.routes) if hasattr(context, "path_regex")
                   and context.path_regex.match(path) for method in context.methods or ()})


def install(app: FastAPI) -> None:
    """Render every error as problem+json: domain, validation and HTTP errors, faults, and the unexpected."""
    # FastAPI's exception_handler(...) registers with add_exception_handler, typed for a handler of one exception class.
    app.exception_handler(TokenmillError)(domain_problem)
    app.exception_handler(RequestValidationError)(_validation_error)
    app.exception_handler(HTTPException)(_http_error)
    for error in DATABASE_AWAY:
        app.add_exception_handler(error, _database_unavailable)
    for error in POOL_BUSY:
        app.add_exception_handler(error, _pool_busy)
    for error in TRANSIENT_ERRORS:
        app.add_exception_handler(error, _store_unavailable)
    for error in (DataError, UnicodeEncodeError):
        app.add_exception_handler(error, _unstorable_value)
    # Starlette runs the handler for Exception outermost, then re-raises for the server's log.
    app.add_exception_handler(Exception, _unexpected)
