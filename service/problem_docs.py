"""The OpenAPI document names every error status an operation can answer, as application/problem+json.

What each /v1 operation can answer besides its success, read from the route itself once the
routes are in: 401 (the key is checked before any route), 503 (the database or store is away,
or every connection or turn is busy), 422 (a parameter or body is refused, field named), 400 (a
JSON body that cannot even be read: not UTF-8), 404 (a path names a row), 413 and 409 (a body is
capped; a write can meet a quota or a conflict) and 429 (the route spends its team's request
rate). FastAPI's own 422 (application/json, its validation error) is replaced: the API answers
problem+json there too (service/problems.py). The request schemas also say which values no part
of the service can hold (service/inputs.py, `stated`).
"""

import json
from collections.abc import Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel, ConfigDict, Field

from service.deps import get_bpe_steps_team, get_rate_limited_team
from service.inputs import stated
from service.problems import MEDIA_TYPE

RATE_LIMITED = (get_rate_limited_team, get_bpe_steps_team)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class Problem(BaseModel):
    """An RFC 9457 problem: what went wrong, for a person and for a program."""

    model_config = ConfigDict(extra="allow")  # a quota's `quota`, `limit` and `used`, for one

    type: str = Field(description="always about:blank: the status and title say what it is")
    title: str
    status: int
    detail: str = Field(description="what is wrong, naming the input; never a host, URL or traceback")
    instance: str | None = Field(None, description="the request's path")
    field: str | None = Field(None, description="the request field at fault (e.g. spec.vocab_size), when one is")
    request_id: str | None = Field(None, description="the id of the request's log lines (also X-Request-ID)")


def statuses(methods: set[str], dependant: Dependant, reads_body: bool = False) -> set[int]:
    """The error statuses an operation can answer; `reads_body`: the route reads a body it describes itself
    (a multipart upload, service/uploads.py)."""
    answered = {401, 503}
    if reads_body or any(_has(dependant, kind) for kind in ("path_params", "query_params", "header_params",
                                                            "body_params")):
        answered.add(422)
    if _has(dependant, "body_params"):
        answered.add(400)  # FastAPI's answer to a JSON body it cannot decode at all
    if _has(dependant, "path_params"):
        answered.add(404)
    if methods & WRITES:
        answered |= {409, 413}
    if _calls(dependant, RATE_LIMITED):
        answered.add(429)
    return answered


def _has(dependant: Dependant, kind: str) -> bool:
    """Whether the operation or one of its dependencies takes parameters of this kind."""
    return bool(getattr(dependant, kind)) or any(_has(sub, kind) for sub in dependant.dependencies)


def _calls(dependant: Dependant, calls: tuple[Callable[..., Any], ...]) -> bool:
    return dependant.call in calls or any(_calls(sub, calls) for sub in dependant.dependencies)


def document(app: FastAPI) -> None:
    """Make the app's OpenAPI document name each /v1 operation's error statuses as problems."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = stated(with_problems(generate(), app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def with_problems(schema: dict[str, Any], app: FastAPI) -> dict[str, Any]:
    """The schema with every /v1 operation's error responses as application/problem+json (a
    status the route declares itself keeps its description)."""
    reference = {"$ref": "#/components/schemas/Problem"}
    for context in iter_route_contexts(app.routes):
        path, methods, route = context.path_format, context.methods or set(), context.original_route
        if not path or not path.startswith("/v1/") or not isinstance(route, APIRoute):
            continue
        reads_body = "requestBody" in (route.openapi_extra or {})
        for method in methods:
            operation = schema["paths"].get(path, {}).get(method.lower())
            if operation is None:
                continue
            for status in sorted(statuses(methods, context.dependant, reads_body)):
                response = operation["responses"].setdefault(str(status), {})
                if response.get("description") in (None, "Validation Error"):
                    response["description"] = HTTPStatus(status).phrase
                response["content"] = {MEDIA_TYPE: {"schema": reference}}
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Problem"] = Problem.model_json_schema()
    if "HTTPValidationError" not in json.dumps(schema["paths"]):  # every 422 is a problem now
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
    return schema
