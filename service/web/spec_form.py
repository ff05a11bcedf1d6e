"""The new-job form's spec fields, built from `TrainingSpec.model_fields`, and the spec a posted form means.

A field the spec gains appears in the form with its default, type and description (its line of
help, as in the API's schema; tests/unit/test_web_forms.py checks none is missing). The form shows the
BASIC fields first and folds the others under "Advanced" (a field the spec gains is advanced
until it is named here). Values go to
`resolve_spec` as the strings the browser sent: pydantic converts them, and its refusals
come back as the same InvalidInput, naming the same field, that the API's 422 carries.
"""

import json
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from starlette.datastructures import FormData

from tokenmill.training.spec import TrainingSpec

# Each field's line of help is its description in the spec (what /docs shows too).
HELP = {name: info.description or "" for name, info in TrainingSpec.model_fields.items()}


# What most jobs choose; the rest of the spec is folded under "Advanced" in the form.
BASIC = ("algorithm", "library", "vocab_size", "byte_level", "byte_fallback", "pre_tokenizer", "special_tokens",
         "parity")


Kind = Literal["choice", "bool", "int", "float", "text", "lines"]


@dataclass(frozen=True)
class SpecField:
    """One input of the form: what it holds, its default, its bounds and a line of help."""

    name: str
    kind: Kind
    optional: bool
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None

    @property
    def basic(self) -> bool:
        return self.name in BASIC

    @property
    def input_name(self) -> str:
        return f"spec.{self.name}"

    @property
    def input_id(self) -> str:
        return f"spec-{self.name}"

    def display_default(self) -> str:
        """The default as the input shows it: '' for "the library decides"."""
        if self.default is None:
            return ""
        if self.kind == "lines":
            return "\n".join(self.default)
        if self.kind == "bool":
            return "true" if self.default else "false"
        return str(self.default)


def _kind(annotation: Any) -> tuple[Kind, bool, tuple[str, ...]]:
    args = typing.get_args(annotation)
    optional = typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        annotation = next(a for a in args if a is not type(None))
    if typing.get_origin(annotation) is Literal:
        return "choice", optional, tuple(str(a) for a in typing.get_args(annotation))
    if typing.get_origin(annotation) is list:
        return "lines", optional, ()
    kinds: dict[type, Kind] = {bool: "bool", int: "int", float: "float", str: "text"}
    return kinds.get(annotation, "text"), optional, ()


def _bounds(metadata: list[Any]) -> tuple[float | None, float | None]:
    low = high = None
    for item in metadata:
        if isinstance(item, (annotated_types.Ge, annotated_types.Gt)):
            low = getattr(item, "ge", getattr(item, "gt", None))
        if isinstance(item, (annotated_types.Le, annotated_types.Lt)):
            high = getattr(item, "le", getattr(item, "lt", None))
    return low, high


def spec_fields() -> list[SpecField]:
    """Every TrainingSpec field, in declaration order."""
    fields = []
    for name, info in TrainingSpec.model_fields.items():
        kind, optional, choices = _kind(info.annotation)
        low, high = _bounds(info.metadata)
        fields.append(SpecField(name=name, kind=kind, optional=optional, default=info.default,
                                help=HELP[name], choices=choices, minimum=low, maximum=high))
    return fields


def form_values(fields: list[SpecField], form: FormData | None) -> dict[str, str]:
    """What each input shows: the posted value when re-rendering, else the default."""
    if form is None:
        return {f.name: f.display_default() for f in fields}
    return {f.name: _posted(form, f) for f in fields}


def spec_values(fields: list[SpecField], spec: dict[str, Any]) -> dict[str, str]:
    """What each input shows to train like a stored spec (a version's, with its changes): its
    values where it has them, the defaults elsewhere."""
    values = form_values(fields, None)
    for field in fields:
        if field.name not in spec:
            continue
        value = spec[field.name]
        if value is None:
            values[field.name] = ""
        elif field.kind == "lines":
            values[field.name] = "\n".join(value)
        elif field.kind == "bool":
            values[field.name] = "true" if value else "false"
        elif isinstance(value, dict):
            values[field.name] = json.dumps(value)
        else:
            values[field.name] = str(value)
    return values


def changed_advanced(fields: list[SpecField], values: dict[str, str]) -> bool:
    """Whether an advanced field holds something other than its default (the form then shows them)."""
    return any(not f.basic and values.get(f.name, "") != f.display_default() for f in fields)


def _posted(form: FormData, field: SpecField) -> str:
    value = form.get(field.input_name)
    if field.kind == "bool" and not field.optional:
        return "true" if value == "true" else "false"  # an unchecked checkbox sends nothing
    return value.strip() if isinstance(value, str) else ""


def spec_from_form(fields: list[SpecField], form: FormData) -> dict[str, Any]:
    """The spec the user asked for: empty inputs are left out so the spec's defaults apply."""
    spec: dict[str, Any] = {}
    for field in fields:
        value = _posted(form, field)
        if field.kind == "lines":
            lines = [line.strip() for line in value.splitlines() if line.strip()]
            if lines:
                spec[field.name] = lines
        elif value != "":
            spec[field.name] = value
    return spec
