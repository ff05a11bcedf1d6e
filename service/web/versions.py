"""The version page (spec, lineage, files, metrics, cost report, vocabulary curve, diff) and its playground.

Downloads delegate to the API's own handlers with the signed-in team, and the playground
endpoints call `encode_with_version` / `encode_with_reference`, as POST .../encode does (a
version's encode runs in tokenmill.sandbox, bounded: one cut short shows its reason in the
playground, with the page's status 422, or 503 and Retry-After when every process is busy). The
prefilled text is tokenized when the page is rendered; if that encode fails, the page stays a
200 and the playground waits for a press of Tokenize. The cost report's fixed texts go through
the same sandbox (tokenmill.cost_report).
"""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse
from markupsafe import Markup, escape
from pydantic import BaseModel, ConfigDict, Field

from service.deps import SessionDep, StoreDep
from service.routes import tokenizers as api
from service.web.auth import ScriptSessionDep, WebSessionDep
from service.web.charts import Axis, Series, empty_chart, line_chart
from service.web.render import WebRoute, render, templates
from tokenmill.cost_report import cost_report
from tokenmill.errors import Busy, InvalidInput, NotFound, TokenmillError
from tokenmill.models import Team, TokenizerVersion
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.playground import MAX_TEXT, encode_with_reference, encode_with_version
from tokenmill.references import REFERENCE_NAMES
from tokenmill.reports import version_evaluations
from tokenmill.spec import TrainingSpec
from tokenmill.store import ObjectStore
from tokenmill.version_diff import load_vocabulary, readable_token, vocabulary_diff
from tokenmill.versions import get_version, list_names, list_versions

router = APIRouter(route_class=WebRoute, include_in_schema=False)

DIFF_SHOWN = 300  # tokens listed per side of the diff; the counts are always complete
PLAYGROUND_TEXT = "Tokenizers turn text into numbers. Der Junge spielt im Garten. Мальчик играет в саду. 1234567"


def tokens_html(result: dict[str, Any]) -> Markup:
    """The playground's token boxes for one encoding (the same markup with or without script)."""
    return Markup(templates.env.get_template("_tokens.html").render(result=result))


def token_shower(row: TokenizerVersion):
    """How the diff shows a token: as text, with spaces and line breaks made visible."""
    byte_level = bool(row.spec.get("byte_level"))
    return lambda token: readable_token(token, byte_level).replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥")


def spec_items(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The spec in TrainingSpec's field order (the database keeps JSON keys in its own order)."""
    order = list(TrainingSpec.model_fields)
    return sorted(spec.items(), key=lambda item: (order.index(item[0]) if item[0] in order else len(order), item[0]))


def compare_options(session, team: Team, name: str) -> list[tuple[str, str]]:
    """(value, label) of everything the playground can compare with: this name's versions, others' latest, references."""
    versions, _ = list_versions(session, team, name, Page(limit=MAX_LIMIT))
    own = [(f"version:{name}@{v.version}", f"{name} v{v.version}") for v in versions]
    others = [(f"version:{row['name']}@latest", f"{row['name']} (latest, v{row['latest']})")
              for row in list_names(session, team, Page(limit=MAX_LIMIT))[0] if row["name"] != name]
    return own + others + [(f"reference:{r}", r) for r in REFERENCE_NAMES]


def encode_target(session, store: ObjectStore, team: Team, target: str, text: str) -> dict[str, Any]:
    """Encode with "reference:NAME" or "version:NAME@VERSION" (404 for another team's version)."""
    kind, _, rest = target.partition(":")
    if kind == "reference":
        return encode_with_reference(rest, text)
    name, _, version = rest.rpartition("@")
    if kind != "version" or not name:
        raise InvalidInput(f"unknown comparison {target!r}", field="compare")
    return encode_with_version(store, get_version(session, team, name, version), text)


def previous_version(session, team: Team, row: TokenizerVersion) -> TokenizerVersion | None:
    if row.version <= 1:
        return None
    try:
        return get_version(session, team, row.name, row.version - 1)
    except NotFound:
        return None


CURVE_TITLE = "Fertility at growing vocabulary sizes (the first k merges of this version)"


def has_curve(row: TokenizerVersion) -> bool:
    """Only BPE has a merge list whose first k merges are a smaller vocabulary (tokenmill.evaluation.vocab_curve)."""
    return row.spec.get("algorithm", "bpe") == "bpe"


def curve_chart(evaluations: list[dict[str, Any]], row: TokenizerVersion) -> Markup:
    """Fertility against vocabulary size, one line per evaluation corpus (BPE versions have a curve)."""
    if not has_curve(row):
        return empty_chart(CURVE_TITLE, "curve", message=f"Not applicable: {row.spec.get('algorithm')} has no merge list")
    series = [Series(f"{e['corpus']} ({e['language']})", [(p["vocab_size"], p["fertility"]) for p in e["metrics"]["vocab_curve"]])
              for e in evaluations if e["metrics"].get("vocab_curve")]
    return line_chart(series, Axis("vocabulary size", log=True), Axis("fertility (tokens per word)"),
                      title=CURVE_TITLE, chart_id="curve")


def prefilled(session, store: ObjectStore, team: Team, row: TokenizerVersion, compare: str) -> list[Markup]:
    """The playground's boxes for its prefilled text, or none if the encode fails (busy, cut short)."""
    try:
        return [tokens_html(encode_with_version(store, row, PLAYGROUND_TEXT)),
                tokens_html(encode_target(session, store, team, compare, PLAYGROUND_TEXT))]
    except TokenmillError:
        return []


@router.get("/tokenizers/{name}/versions/{version}")
def version_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep, name: str, version: str,
                 text: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
                 compare: Annotated[str | None, Query(max_length=300)] = None):
    row = get_version(session, web.team, name, version)
    evaluations = version_evaluations(session, web.team, row)
    previous = previous_version(session, web.team, row)
    diff = vocabulary_diff(load_vocabulary(store, previous), load_vocabulary(store, row)) if previous else None
    compare = compare or "reference:o200k_base"
    results, status, headers = [], 200, {}
    if text is None:
        results = prefilled(session, store, web.team, row, compare)
    elif text:
        try:
            results = [tokens_html(encode_with_version(store, row, text)),
                       tokens_html(encode_target(session, store, web.team, compare, text))]
        except (InvalidInput, Busy) as exc:
            # The page stays, with the reason where the tokens would be (the field is the text box).
            results = [Markup('<p class="error-text" role="alert">{}</p>').format(escape(exc.detail)), Markup("")]
            status = exc.status
            headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else {}
    response = render(request, "version.html", web, status_code=status, row=row, evaluations=evaluations,
                      previous=previous, diff=diff, diff_shown=DIFF_SHOWN, curve_chart=curve_chart(evaluations, row),
                      has_curve=has_curve(row), report=cost_report(session, store, web.team, row),
                      spec=spec_items(row.spec), options=compare_options(session, web.team, row.name),
                      readable=token_shower(row), compare=compare, text=text if text is not None else PLAYGROUND_TEXT,
                      results=results)
    response.headers.update(headers)
    return response


@router.get("/tokenizers/{name}/versions/{version}/files/{filename}")
def download_file(session: SessionDep, store: StoreDep, web: WebSessionDep, name: str, version: str, filename: str):
    return api.download_file(session, store, web.team, name, version, filename)


@router.get("/tokenizers/{name}/versions/{version}/bundle.tar.gz")
def download_bundle(session: SessionDep, store: StoreDep, web: WebSessionDep, name: str, version: str):
    return api.download_bundle(session, store, web.team, name, version)


class PlaygroundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    target: str = Field(max_length=300)


@router.post("/playground/encode")
def encode(request: Request, body: PlaygroundIn, session: SessionDep, store: StoreDep, web: ScriptSessionDep):
    """One playground panel: ids, tokens and counts, plus the boxes as HTML."""
    result = encode_target(session, store, web.team, body.target, body.text)
    return JSONResponse({**result, "html": tokens_html(result)})
