"""Values no part of Tokenmill can hold, refused at the edge with a 422 that names the field.

A NUL character (PostgreSQL text cannot hold one), a lone surrogate (U+D800-U+DFFF: not
text, no encoder takes it), a JSON integer beyond 64 bits or a non-finite JSON number.
`check_request_values` runs for every route (a dependency of the app) over the path and
query parameters and a JSON body; forms are checked where they are read, after
authentication (`CorpusFields.validate`, the dashboard's `checked_form`). What slips past
reaches the database's DataError or UnicodeEncodeError, which service/problems.py also
renders as a 422, without a field.
"""

import copy
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from fastapi import Request

from tokenmill.db import unstorable
from tokenmill.errors import InvalidInput

MAX_INTEGER = 2**63 - 1
# The highest page a list serves: (page - 1) * limit still fits the database's 64-bit offset.
MAX_PAGE = 2**31 - 1


def check_text(value: str | None, field: str) -> None:
    """Refuse a string field that cannot be stored, naming it."""
    reason = unstorable(value) if isinstance(value, str) else None
    if reason:
        raise InvalidInput(f"'{field}' {reason}", field=field)


def _json_problems(value: Any, field: str, item: str = "") -> Iterator[tuple[str, str]]:
    # Depth first over a parsed JSON document: (field, reason) for every bad value. Fields are
    # named by their keys ("spec.special_tokens"); a list's bad item is named in the reason.
    if isinstance(value, str):
        if reason := unstorable(value):
            yield field, item + reason
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        if abs(value) > MAX_INTEGER:
            yield field, item + f"is out of range (at most {MAX_INTEGER} in absolute value)"
    elif isinstance(value, float):
        if not math.isfinite(value):
            yield field, item + "is not a finite number"
    elif isinstance(value, Mapping):
        for key, child in value.items():
            path = f"{field}.{key}" if field else str(key)
            if reason := unstorable(str(key)):
                yield path, f"(a key) {reason}"
            yield from _json_problems(child, path)
    elif isinstance(value, list):
        for index, element in enumerate(value):
            yield from _json_problems(element, field, f"{item}item {index} ")


def check_json(document: Any) -> None:
    """Refuse a JSON body holding a value that cannot be stored, naming the first one."""
    for field, reason in _json_problems(document, ""):
        raise InvalidInput(f"'{field or 'body'}' {reason}", field=field or "body")


def check_values(values: Iterable[tuple[str, Any]]) -> None:
    """Refuse the first string among (name, value) pairs that cannot be stored."""
    for name, value in values:
        check_text(value, name)


def _is_json(request: Request) -> bool:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


async def check_request_values(request: Request) -> None:
    """The path and query parameters and the JSON body of any request, before the route sees them."""
    check_values(request.path_params.items())
    check_values(request.query_params.multi_items())
    if request.method in ("POST", "PUT", "PATCH") and _is_json(request):
        try:
            document = await request.json()  # parsed once: FastAPI's own read is cached on the request
        except ValueError:
            return  # malformed JSON: the route's validation names it
        check_json(document)


# What `check_request_values` refuses, as the request schemas of the OpenAPI document say it: a text
# holds no NUL (a lone surrogate is no UTF-8 text to begin with), an integer fits 64 bits.
NO_NUL = "^[^\\x00]*$"
NOT_BLANK = "^[^\\x00]*[^\\s\\x00][^\\x00]*$"  # and more than spaces
SCHEMA_MAPS = ("properties", "patternProperties")
SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
UNTOUCHED = frozenset({"pattern", "enum", "const", "format", "contentMediaType"})  # strings these say enough of


def stated(document: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI document with what no part of Tokenmill can hold stated in every request schema (the
    parameters, the bodies and the components they name): a string without a pattern, enum or format of
    its own matches NO_NUL, free object keys too, and an integer without bounds is within MAX_INTEGER."""
    document = copy.deepcopy(document)  # schemas given as constants (WithJsonSchema) stay as they are
    components = document.get("components", {}).get("schemas", {})
    visited: set[str] = set()

    def visit(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name in components and name not in visited:
                visited.add(name)
                visit(components[name])
            return
        if schema.get("type") == "string" and not UNTOUCHED & schema.keys():
            schema["pattern"] = NO_NUL
        elif schema.get("type") == "integer" and not {"enum", "const"} & schema.keys():
            schema.setdefault("minimum", -MAX_INTEGER)
            schema.setdefault("maximum", MAX_INTEGER)
        elif schema.get("type") == "object" and isinstance(schema.get("additionalProperties"), dict):
            schema.setdefault("propertyNames", {"pattern": NO_NUL})
        for key in SCHEMA_MAPS:
            for child in schema.get(key, {}).values():
                visit(child)
        for key in SCHEMA_VALUES:
            visit(schema.get(key))
        for key in SCHEMA_LISTS:
            for child in schema.get(key, []):
                visit(child)

    for operations in document.get("paths", {}).values():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                visit(parameter.get("schema"))
            for content in operation.get("requestBody", {}).get("content", {}).values():
                visit(content.get("schema"))
    return document
