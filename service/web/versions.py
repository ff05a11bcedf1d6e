"""The version page (spec, lineage, files, metrics, cost report, vocabulary curve, diff) and its playground.

The cost report is the detailed one: each premium with its tokens, corpus-level premiums of
parallel corpora whose lines do not align, said so, and notes where the version's split (or a
reference's) cuts a language's words below what merges can mend (service.web.floors). A
parity-aware version stands beside its plain twin (service.web.parity), or offers to train it.
Every token reads as its own text (service.web.tokens).

Downloads answer as the API's do (service/downloads.py), with the signed-in team, and the playground
endpoints call `encode_with_version` / `encode_with_reference`, as POST .../encode does (a
version's encode runs in tokenmill.sandboxed.sandbox, bounded: one cut short shows its reason in the
playground, with the page's status 422, or 503 and Retry-After when every process is busy). The
prefilled text is tokenized when the page is rendered; if that encode fails, the page stays a
200 and the playground waits for a press of Tokenize. The cost report's fixed texts go through
the same sandbox (tokenmill.playground.cost_report).

The playground samples too (tokenmill.sandboxed.subword_sampling): a ticked "Sample" box sends the
version's panel BPE-dropout's p, or Unigram's alpha and n-best size, and a seed, as query
parameters of the same GET form (or in the script's JSON); "Next seed" (`reseed`) samples with
the following seed. The comparison panel stays the plain encode. A value out of bounds is the
playground's 422, naming the control.
"""

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from markupsafe import Markup, escape
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.orm import Session

from service.deps import SessionDep, StoreDep, spend_dashboard_request
from service.downloads import bundle_response, file_response
from service.web.auth import ScriptSessionDep, WebSessionDep
from service.web.charts import Axis, Series, empty_chart, line_chart
from service.web.floors import floor_notes, one_per_language, version_pattern
from service.web.parity import parallel_group, side_by_side, twin, twin_form_query
from service.web.render import WebRoute, render, templates
from service.web.tokens import token_labels, version_labeller
from tokenmill.corpora.rows import newest_corpora
from tokenmill.db import release
from tokenmill.errors import Busy, InvalidInput, NotFound, TokenmillError
from tokenmill.evaluation.references import PRESET_REFERENCES, REFERENCE_NAMES, reference_token_ids
from tokenmill.evaluation.reports import version_curve, version_evaluations, version_label
from tokenmill.models import Team, TokenizerVersion
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.playground.cost_report import combine, measured_costs, probed_costs
from tokenmill.playground.encode import MAX_TEXT, encode_with_reference, encode_with_version
from tokenmill.playground.scripts import diff_by_script, vocabulary_report
from tokenmill.sandboxed.subword_sampling import MAX_SEED, SamplingOptions, chosen, method_of
from tokenmill.store import ObjectStore
from tokenmill.training.spec import TrainingSpec
from tokenmill.versions.diff import additions, diff_from, load_vocabulary, versions_diff
from tokenmill.versions.registry import get_version, list_names, list_versions

router = APIRouter(route_class=WebRoute, include_in_schema=False)

DIFF_SHOWN = 300  # tokens listed per side of the diff; the counts are always complete
PLAYGROUND_TEXT = "Tokenizers turn text into numbers. Der Junge spielt im Garten. Мальчик играет в саду. 1234567"


def tokens_html(result: dict[str, Any], version: TokenizerVersion | None) -> Markup:
    """The playground's token boxes for one encoding (the same markup with or without script), each
    labelled by its own text (service.web.tokens); `version` None for a reference's encoding."""
    return Markup(templates.env.get_template("_tokens.html").render(result=result,
                                                                    labels=token_labels(result, version)))


def spec_items(spec: dict[str, Any]) -> list[tuple[str, Any]]:
    """The spec in TrainingSpec's field order (the database keeps JSON keys in its own order)."""
    order = list(TrainingSpec.model_fields)
    return sorted(spec.items(), key=lambda item: (order.index(item[0]) if item[0] in order else len(order), item[0]))


def compare_options(session: Session, team: Team, name: str) -> list[tuple[str, str]]:
    """(value, label) of everything the playground can compare with: this name's versions, others' latest, references."""
    versions, _ = list_versions(session, team, name, Page(limit=MAX_LIMIT))
    own = [(f"version:{name}@{v.version}", f"{name} v{v.version}") for v in versions]
    others = [(f"version:{row['name']}@latest", f"{row['name']} (latest, v{row['latest']})")
              for row in list_names(session, team, Page(limit=MAX_LIMIT))[0] if row["name"] != name]
    return own + others + [(f"reference:{r}", r) for r in REFERENCE_NAMES]


def resolve_target(session: Session, team: Team, target: str) -> TokenizerVersion | str:
    """What "reference:NAME" or "version:NAME@VERSION" names: the version's row (404 for another
    team's), or the reference's name. Resolved before the encode, so that the route can release
    its database connection while the sandbox encodes."""
    kind, _, rest = target.partition(":")
    if kind == "reference":
        return rest
    name, _, version = rest.rpartition("@")
    if kind != "version" or not name:
        raise InvalidInput(f"unknown comparison {target!r}", field="compare")
    return get_version(session, team, name, version)


def encode_target(store: ObjectStore, target: TokenizerVersion | str | TokenmillError, text: str,
                  sampling: SamplingOptions | None = None) -> dict[str, Any]:
    """Encode with a resolved target (raising the error its resolution met), sampled with
    `sampling` (versions only)."""
    if isinstance(target, TokenmillError):
        raise target
    if isinstance(target, str):
        if sampling is not None:
            raise InvalidInput(f"{target} is a reference: only a version's encode can be sampled", field="sampling")
        return encode_with_reference(target, text)
    return encode_with_version(store, target, text, sampling)


def target_html(store: ObjectStore, target: TokenizerVersion | str | TokenmillError, text: str,
                sampling: SamplingOptions | None = None) -> Markup:
    """A comparison panel's boxes: the target's encode, labelled as its tokens read."""
    return tokens_html(encode_target(store, target, text, sampling), target if isinstance(target, TokenizerVersion) else None)


SAMPLING_FIELDS = ("dropout", "alpha", "nbest_size", "seed")


def sampling_controls(row: TokenizerVersion, sample: str | None, given: dict[str, str | None]) -> dict[str, Any]:
    """What the playground's sampling controls show: the method (None: the version cannot sample), the box,
    and each value as asked, else as the version recorded, else the default."""
    recorded = row.spec.get("sampling") or {}
    values = {name: chosen(name, given.get(name), recorded) for name in SAMPLING_FIELDS}
    try:
        next_seed = (int(values["seed"]) + 1) % (MAX_SEED + 1)
    except ValueError:
        next_seed = 0
    return {"method": method_of(row.spec), "on": bool(sample), "values": values, "next_seed": next_seed}


def sampling_options(controls: dict[str, Any], given: dict[str, str | None]) -> SamplingOptions | None:
    """The ticked controls as the options of a sampled encode (only the fields this version's method
    takes), or None; InvalidInput names a value out of bounds."""
    if not controls["on"]:
        return None
    method = controls["method"] or "none"
    fields = {"bpe-dropout": ("dropout", "seed"), "unigram": ("alpha", "nbest_size", "seed")}.get(method, ())
    return checked_options({name: given[name] for name in fields if given.get(name) not in (None, "")})


def checked_options(raw: dict[str, Any]) -> SamplingOptions:
    """Sampling options from the playground (form or script): InvalidInput, a 422, names a bad one (the
    dashboard's own validation errors are 400s without a field)."""
    try:
        return SamplingOptions.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        name = f"sampling.{error['loc'][0]}" if error["loc"] else "sampling"
        raise InvalidInput(f"'{name}' {error['msg']}", field=name) from None


@dataclass(frozen=True)
class Base:
    """What a version grew from: the base it extends (a version of the team's, or a reference
    by its tiktoken name) or its SuperBPE first stage, and the id its own tokens start at."""

    label: str
    link: str | None
    diff_from: TokenizerVersion | str | None  # what "Added to" diffs against (None: no vocabulary of its own)
    first_new_id: int
    merges_added: int
    unit: str = "merges"  # what it added: merges (byte-level BPE) or pieces (a sentencepiece model)


def base_of(session: Session, team: Team, row: TokenizerVersion) -> Base | None:
    """The version's base, from its lineage (an extension's base, a SuperBPE transition), or None."""
    if superword := row.lineage.get("superword"):
        return Base(f"its first stage ({superword['transition_vocab_size']:,} tokens)", None, None,
                    superword["transition_vocab_size"], superword["merges_added"])
    base = row.lineage.get("base")
    if not base:
        return None
    if base.get("reference"):
        reference = PRESET_REFERENCES[base["reference"]]
        return Base(f"reference {reference}", None, reference, base["first_new_id"], base["merges_added"])
    try:
        found: TokenizerVersion | None = get_version(session, team, base["tokenizer"], base["version"])
    except NotFound:
        found = None  # deleted since: named, not linked
    link = f"/tokenizers/{quote(base['tokenizer'], safe='')}/versions/{base['version']}" if found else None
    return Base(f"{base['tokenizer']} v{base['version']}", link, found, base["first_new_id"], base["merges_added"],
                "pieces" if "pieces_added" in base else "merges")


def previous_version(session: Session, team: Team, row: TokenizerVersion) -> TokenizerVersion | None:
    if row.version <= 1:
        return None
    try:
        return get_version(session, team, row.name, row.version - 1)
    except NotFound:
        return None


CURVE_TITLE = "Fertility at growing vocabulary sizes (the first k merges of this version)"


def has_curve(row: TokenizerVersion) -> bool:
    """Only BPE has a merge list whose first k merges are a smaller vocabulary (tokenmill.evaluation.measuring.vocab_curve)."""
    return bool(row.spec.get("algorithm", "bpe") == "bpe")


def curve_chart(curves: list[dict[str, Any]], row: TokenizerVersion) -> Markup:
    """Fertility against vocabulary size: the version's curve (one line per corpus for versions
    evaluated before curves were per version). BPE versions have one."""
    if not has_curve(row):
        return empty_chart(CURVE_TITLE, "curve", message=f"Not applicable: {row.spec.get('algorithm')} has no merge list")
    series = [Series(curve["label"], [(p["vocab_size"], p["fertility"]) for p in curve["points"]]) for curve in curves]
    return line_chart(series, Axis("vocabulary size", log=True), Axis("fertility (tokens per word)"),
                      title=CURVE_TITLE, chart_id="curve")


def prefilled(store: ObjectStore, row: TokenizerVersion, target: TokenizerVersion | str | TokenmillError) -> list[Markup]:
    """The playground's boxes for its prefilled text, or none if the encode fails (busy, cut short)."""
    try:
        return [target_html(store, row, PLAYGROUND_TEXT), target_html(store, target, PLAYGROUND_TEXT)]
    except TokenmillError:
        return []


def parity_context(session: Session, team: Team, row: TokenizerVersion) -> dict[str, Any]:
    """What the page says of parity: whether the version is parity-aware, the twin trained the other
    way (and the two side by side per language of the training group), or how to train it."""
    on = bool(row.spec.get("parity"))
    # Only byte-level BPE trained by tokenizers can be parity-aware (README, the training spec).
    could = row.spec.get("algorithm") == "bpe" and row.spec.get("library") == "tokenizers" and row.spec.get("byte_level")
    group = parallel_group(session, team, row) if on or could else None
    other = twin(session, team, row) if group else None
    return {"on": on, "group": group, "twin": other,
            "rows": side_by_side(session, team, row, other, group) if other and group else [],
            "train_twin": f"/jobs/new?{twin_form_query(row)}" if group and not other and not row.lineage.get("imported")
            else None}


@router.get("/tokenizers/{name}/versions/{version}")
def version_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep, name: str, version: str,
                 text: Annotated[str | None, Query(max_length=MAX_TEXT)] = None,
                 compare: Annotated[str | None, Query(max_length=300)] = None,
                 sample: Annotated[str | None, Query(max_length=10)] = None,
                 dropout: Annotated[str | None, Query(max_length=30)] = None,
                 alpha: Annotated[str | None, Query(max_length=30)] = None,
                 nbest_size: Annotated[str | None, Query(max_length=30)] = None,
                 seed: Annotated[str | None, Query(max_length=30)] = None,
                 reseed: Annotated[str | None, Query(max_length=30)] = None) -> HTMLResponse:
    spend_dashboard_request(request, web.team)  # the cost report, the diff and the playground's encodes
    row = get_version(session, web.team, name, version)
    evaluations = version_evaluations(session, web.team, row)
    previous = previous_version(session, web.team, row)
    curve, measured = version_curve(session, web.team, row), measured_costs(session, store, web.team, row, detailed=True)
    options = compare_options(session, web.team, row.name)
    parity = parity_context(session, web.team, row)
    languages = {e["language"] for e in evaluations}
    corpora = one_per_language(session.scalars(newest_corpora(web.team.id)), languages)
    compare = compare or "reference:o200k_base"
    try:
        target: TokenizerVersion | str | TokenmillError = resolve_target(session, web.team, compare)
    except TokenmillError as exc:  # shown where the comparison's tokens would be, as an encode's failure is
        target = exc
    base = base_of(session, web.team, row)
    release(session)  # the rest reads the store and encodes in the sandbox
    against = base.diff_from if base is not None and base.diff_from is not None else previous
    diff = None
    if isinstance(against, str):
        diff = diff_from(f"reference:{against}", lambda: reference_token_ids(against), store, row)
    elif against is not None:
        diff = versions_diff(store, against, row)
    added = additions(load_vocabulary(store, row), base.first_new_id) if base is not None else None
    given = {"dropout": dropout, "alpha": alpha, "nbest_size": nbest_size, "seed": seed if reseed is None else reseed}
    controls = sampling_controls(row, "on" if reseed is not None else sample, given)  # "Next seed" samples
    results, status, headers = [], 200, {}
    if text is None:
        results = prefilled(store, row, target)
    elif text:
        try:
            sampling = sampling_options(controls, given)
            results = [target_html(store, row, text, sampling), target_html(store, target, text)]
        except (InvalidInput, Busy) as exc:
            # The page stays, with the reason where the tokens would be (the field is the text box).
            results = [Markup('<p class="error-text" role="alert">{}</p>').format(escape(exc.detail)), Markup("")]
            status = exc.status
            headers = {"Retry-After": str(exc.retry_after)} if isinstance(exc, Busy) else {}
    try:
        scripts = vocabulary_report(store, row)
    except Busy:
        scripts = None  # the section says it could not be counted now
    notes = floor_notes(store, corpora, [(version_label(row), version_pattern(row))])
    moved = diff_by_script(str(row.id), against if isinstance(against, str) else str(against.id),
                           [t for t, _ in diff.added], [t for t, _ in diff.removed],
                           bool(row.spec.get("byte_level"))) if against is not None and diff else None
    response = render(request, "version.html", web, status_code=status, row=row, evaluations=evaluations,
                      previous=previous, origin=base, added=added, diff=diff, scripts=scripts, moved=moved, diff_shown=DIFF_SHOWN, curve_chart=curve_chart(curve, row),
                      has_curve=has_curve(row), report=combine(measured, probed_costs(store, row)),
                      spec=spec_items(row.spec), options=options, parity=parity, floor_notes=notes,
                      readable=version_labeller(row.spec), label=version_label(row), compare=compare, text=text if text is not None else PLAYGROUND_TEXT,
                      results=results, sampling=controls)
    response.headers.update(headers)
    return response


@router.get("/tokenizers/{name}/versions/{version}/files/{filename}")
def download_file(session: SessionDep, store: StoreDep, web: WebSessionDep, name: str, version: str,
                  filename: str) -> StreamingResponse:
    return file_response(store, get_version(session, web.team, name, version), filename)


@router.get("/tokenizers/{name}/versions/{version}/bundle.tar.gz")
def download_bundle(session: SessionDep, store: StoreDep, web: WebSessionDep, name: str,
                    version: str) -> Response:
    return bundle_response(store, get_version(session, web.team, name, version))


class PlaygroundIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str
    target: str = Field(max_length=300)
    sampling: dict[str, Any] | None = None  # SamplingOptions, checked by the route to name a bad field


@router.post("/playground/encode")
def encode(request: Request, body: PlaygroundIn, session: SessionDep, store: StoreDep,
           web: ScriptSessionDep) -> JSONResponse:
    """One playground panel: ids, tokens and counts, plus the boxes as HTML."""
    spend_dashboard_request(request, web.team)
    sampling = None if body.sampling is None else checked_options(body.sampling)
    target = resolve_target(session, web.team, body.target)
    release(session)  # the encode may take its whole time limit
    result = encode_target(store, target, body.text, sampling)
    return JSONResponse({**result, "html": tokens_html(result, target if isinstance(target, TokenizerVersion) else None)})
