"""What the API's names and numbers may be, as the OpenAPI document states it: path parameters typed once,
the JSON schemas the request bodies borrow, and bodies read with JSON's types.

The routes read names and versions as they always did (a version is parsed by
tokenmill.versions.registry.get_version, a tokenizer's name checked by check_tokenizer_name), so
their 404s and 422s are unchanged: the document only says what they accept.
"""

import functools
from typing import Annotated, Any

from fastapi import Path
from pydantic import BaseModel, ValidationInfo, WithJsonSchema, field_validator
from pydantic_core import PydanticCustomError

from tokenmill.evaluation.references import REFERENCE_NAMES
from tokenmill.jobs.submission import NAME_PATTERN
from tokenmill.versions.registry import MAX_VERSION

# A version: its number (1 to 2³¹−1, the column's 32-bit integer) or `latest`, the newest.
VERSION_SCHEMA: dict[str, Any] = {"anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_VERSION},
                                            {"type": "string", "enum": ["latest"]}]}
# A tokenizer's name, as check_tokenizer_name takes it (a name that cannot be one is a 404 where it is read).
NAME_SCHEMA: dict[str, Any] = {"type": "string", "pattern": f"^{NAME_PATTERN.pattern}$"}

VersionPath = Annotated[str, WithJsonSchema(VERSION_SCHEMA),
                        Path(description="the version's number, or `latest` for the newest")]
NamePath = Annotated[str, WithJsonSchema(NAME_SCHEMA), Path(description="the tokenizer's name")]
ReferencePath = Annotated[str, WithJsonSchema({"type": "string", "enum": list(REFERENCE_NAMES)}),
                          Path(description="a reference tokenizer")]


class JsonTyped(BaseModel):
    """A request body whose scalars are taken with the JSON types its schema names: pydantic's lax mode would
    read true as 1, 0 as false and "5" as 5, none of which the document allows (an integral 5.0 stays 5)."""

    @field_validator("*", mode="before")
    @classmethod
    def _json_typed(cls, value: Any, info: ValidationInfo) -> Any:
        kinds = _json_kinds(cls).get(info.field_name or "")
        if not kinds or value is None or isinstance(value, dict | list):
            return value
        if isinstance(value, bool):
            fits = "boolean" in kinds
        elif isinstance(value, int | float):
            fits = bool(kinds & {"integer", "number"})
        else:
            fits = not isinstance(value, str) or "string" in kinds
        if not fits:
            raise PydanticCustomError("json_type", "Input should be a valid {kinds}",
                                      {"kinds": " or ".join(sorted(kinds - {"null"}))})
        return value


@functools.cache
def _json_kinds(model: type[BaseModel]) -> dict[str, frozenset[str]]:
    """The JSON types each field's schema allows (a field some branch of which names none is left out)."""
    kinds = {}
    for name, schema in model.model_json_schema()["properties"].items():
        branches = schema.get("anyOf") or schema.get("oneOf") or [schema]
        if all("type" in branch for branch in branches):
            kinds[name] = frozenset(branch["type"] for branch in branches)
    return kinds
