"""RFC 9457 problem+json: every error the API returns, rendered in one place."""

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from tokenmill.errors import TokenmillError

MEDIA_TYPE = "application/problem+json"


def problem(status: int, title: str, detail: str, **extra) -> JSONResponse:
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    body.update({key: value for key, value in extra.items() if value is not None})
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def domain_problem(request: Request, exc: TokenmillError) -> JSONResponse:
    """The problem+json of a domain error (also for routes that catch it to answer a form)."""
    return problem(exc.status, exc.title, exc.detail, field=exc.field, instance=request.url.path)


def _field_error(err: dict) -> dict[str, str]:
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
    return problem(exc.status_code, str(exc.detail), str(exc.detail), instance=request.url.path)


def install(app: FastAPI) -> None:
    """Render domain errors, validation errors and HTTP errors as problem+json."""
    app.add_exception_handler(TokenmillError, domain_problem)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)

