"""The BPE step-through page (/bpe): the seed article's widget, on a typed corpus or a stored version.

Without script the page is a GET form: Step, Back, Reset and Automerge are submit buttons
naming the step to show, and the server renders that one state (a corpus of a few thousand
characters fits in the URL; the server reads request lines up to 16 kB). With script, the
page posts the same fields to /bpe/steps once per corpus, rule or version and gets up to
WINDOW states as ready HTML (the same templates), then steps without asking again; Automerge
plays them. Both call `compute`, the function behind POST /v1/bpe/steps.

The vocabulary and the merge list are rendered once, whole, each entry numbered: a state
shows the first `vocabulary_size` and the first `step` of them (the script hides the rest),
so a step never re-sends them.
"""

import math
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from markupsafe import Markup, escape
from pydantic import ValidationError
from sqlalchemy.orm import Session

from service.deps import SessionDep, StoreDep, spend_dashboard_request
from service.web.auth import ScriptSessionDep, WebSessionDep
from service.web.charts import CHAR_WIDTH, FONT, MARK, PALETTE, linear_domain, responsive, tick_label
from service.web.render import WebRoute, render, templates
from service.web.tokens import version_labeller
from tokenmill.corpora.rows import newest_corpora
from tokenmill.db import release
from tokenmill.errors import InvalidInput, TokenmillError
from tokenmill.models import Corpus, Team
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.playground.bpe_replay import MAX_SAMPLE_LINES, SAMPLE_LINES
from tokenmill.playground.bpe_runs import BpeStepsIn, compute
from tokenmill.playground.bpe_steps import (
    DEFAULT_CORPUS,
    END_OF_WORD,
    MAX_CHARACTERS,
    MAX_STEPS,
    TIE_BREAKS,
    Run,
    State,
)
from tokenmill.versions.registry import get_version, list_names

router = APIRouter(route_class=WebRoute, include_in_schema=False)

WINDOW = 40  # states per script request
BARS = 12  # pairs in the chart; the table below it lists more
WORDS_SHOWN = 300
PAIRS_SHOWN = 60
CORPORA_LISTED = 200
OTHER_BARS = "#9aa3b2"  # the pairs that do not merge next: grey, so the one that does stands out
Shown = Callable[[str], str]  # how the page writes a token


def pair_label(pair: tuple[str, str], shown: Shown = str, limit: int = 18) -> str:
    """The pair as "e + r", as the page shows tokens, cut short for a chart's label column."""
    text = f"{shown(pair[0])} + {shown(pair[1])}"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pair_chart(state: State, chart_id: str = "bpe-chart", shown: Shown = str) -> Markup:
    """Horizontal bars of the top pair counts (charts.py's look, drawn for a wide box and a phone's),
    the next merge's bar highlighted.

    In a replay the version's next pair may rank below the top BARS, or not occur at all in
    the sample: then it gets a bar of its own at the bottom, so the chart always shows it.
    """
    bars = list(state.pairs[:BARS])
    following = state.next
    chosen = following.pair if following else None
    if following and chosen and all(pair != chosen for pair, _ in bars):
        bars.append((chosen, following.count))
    if not bars:
        return Markup(f'<p class="empty" id="{chart_id}">No adjacent pairs left: every word is one token.</p>')

    def draw(width: int, size: str) -> str:
        # The label column takes what the longest pair needs, up to a share of the drawing (longer ones are cut).
        fits = int((width * (0.42 if size == "narrow" else 0.36) - 14) / CHAR_WIDTH)
        labels = {pair: pair_label(pair, shown, fits) for pair, _ in bars}
        left = math.ceil(max(len(label) for label in labels.values()) * CHAR_WIDTH) + 14
        right, top, bar, gap = 40, 8, 18, 6
        plot = len(bars) * (bar + gap)
        height = top + plot + 40
        lo, hi, ticks = linear_domain(0, max(count for _, count in bars) or 1, integer=True, target=4 if size == "narrow" else 5)
        scale = (width - left - right) / ((hi - lo) or 1)
        parts = [f'<line x1="{left + (t - lo) * scale:.1f}" y1="{top}" x2="{left + (t - lo) * scale:.1f}" '
                 f'y2="{top + plot}" stroke="#e3e3e3"/><text x="{left + (t - lo) * scale:.1f}" y="{top + plot + 16}" '
                 f'text-anchor="middle" {FONT}>{tick_label(t)}</text>' for t in ticks]
        for i, (pair, count) in enumerate(bars):
            y = top + i * (bar + gap)
            highlighted = pair == chosen  # only when there is a next merge (chosen is None without one)
            unseen = following is not None and following.count == 0
            colour = (MARK if unseen else PALETTE[0]) if highlighted else OTHER_BARS
            weight, marked = (' font-weight="700"', ' data-next="true"') if highlighted else ("", "")
            length = max(count * scale, 1)
            parts.append(f'<text x="{left - 6}" y="{y + bar / 2 + 4}" text-anchor="end" {FONT}{weight}>'
                         f'{escape(labels[pair])}</text>'
                         f'<rect x="{left}" y="{y}" width="{length:.1f}" height="{bar}" fill="{colour}" '
                         f'data-pair="{escape(pair[0])} {escape(pair[1])}" data-count="{count}"{marked}>'
                         f'<title>{escape(shown(pair[0]))} + {escape(shown(pair[1]))}: {count}</title></rect>'
                         f'<text x="{left + length + 4:.1f}" y="{y + bar / 2 + 4}" {FONT}>{count}</text>')
        parts.append(f'<text x="{width / 2}" y="{top + plot + 34}" text-anchor="middle" {FONT}>'
                     'occurrences (each word counted as often as it occurs)</text>')
        title = f"Adjacent pair counts at step {state.step}"
        return (f'<svg class="chart chart-{size} bpe-chart" role="img" aria-labelledby="{chart_id}-{size}-title" '
                f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg" '
                f'id="{chart_id}-{size}"><title id="{chart_id}-{size}-title">{escape(title)}</title>{"".join(parts)}</svg>')

    return responsive(chart_id, draw)


def shower(session: Session, team: Team, tokenizer: str | None, version: str) -> Shown:
    """How the page shows a run's tokens: a replayed version's as its tokens read (byte-level "Ġthe"
    as "␣the", "▁" as "␣", a cut character's bytes as <0xD0>); a typed corpus's as they are."""
    if not tokenizer:
        return str
    try:
        return version_labeller(get_version(session, team, tokenizer, version or "latest").spec)
    except TokenmillError:
        return str  # the run itself says what is wrong


def state_context(run: Run, state: State, about: dict[str, Any], shown: Shown = str) -> dict[str, Any]:
    """What _bpe_state.html needs to draw one state."""
    made = run.merges[state.step - 1].token if state.step else None
    return {"state": state, "about": about, "total": len(run.merges), "done": run.done, "made": made,
            "rank": state.next_rank, "shown": shown,
            "chart": pair_chart(state, shown=shown), "words_shown": WORDS_SHOWN, "pairs_shown": PAIRS_SHOWN,
            "min_count": about.get("min_count")}


def state_html(run: Run, state: State, about: dict[str, Any], shown: Shown = str) -> Markup:
    return Markup(templates.env.get_template("_bpe_state.html").render(state_context(run, state, about, shown)))


def lists_html(run: Run, state: State, shown: Shown = str) -> Markup:
    return Markup(templates.env.get_template("_bpe_lists.html").render(run=run, state=state, shown=shown))


def run_heading(about: dict[str, Any]) -> str:
    """What the steps below are of: the typed corpus, or a version on a corpus's sample."""
    if about["mode"] != "version":
        return "Stepping through the corpus"
    sample = about["sample"]
    cut = f" (cut at {sample['characters']:,} characters)" if sample["truncated"] else ""
    return (f"{about['tokenizer']} v{about['version']}: its first merges on the first {sample['lines']} lines of "
            f"{about['corpus_name']}{cut}")


def corpus_options(session: Session, team: Team) -> list[Corpus]:
    return list(session.scalars(newest_corpora(team.id).limit(CORPORA_LISTED)))


def request_body(corpus: str | None, tie_break: str, end_of_word: bool, step: int, tokenizer: str | None,
                 version: str, corpus_id: str | None, lines: int) -> BpeStepsIn:
    """The page's query as the API's body: a version replay when a tokenizer is named."""
    if tokenizer:
        try:
            parsed = uuid.UUID(corpus_id or "")
        except ValueError:
            raise InvalidInput("choose one of the team's corpora to sample", field="corpus_id") from None
        fields: dict[str, Any] = {"tokenizer": tokenizer, "version": version or "latest", "corpus_id": parsed,
                                  "lines": lines}
    else:
        fields = {"corpus": DEFAULT_CORPUS if corpus is None else corpus, "tie_break": tie_break,
                  "end_of_word": end_of_word}
    try:
        return BpeStepsIn(**fields, steps=MAX_STEPS, start=step)
    except ValidationError as exc:  # a corpus past the bound: said on the page, like the API's 422
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise InvalidInput(f"{field}: {error['msg']}", field=field) from None


@router.get("/bpe")
def bpe_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep,
             corpus: Annotated[str | None, Query(max_length=4 * MAX_CHARACTERS)] = None,
             tie_break: Literal["first_seen", "tokenizers"] = "first_seen",
             end_of_word: bool = False,
             step: Annotated[int, Query(ge=0, le=MAX_STEPS)] = 0,
             tokenizer: Annotated[str | None, Query(max_length=200)] = None,
             version: Annotated[str, Query(max_length=40)] = "latest",
             corpus_id: Annotated[str | None, Query(max_length=40)] = None,
             lines: Annotated[int, Query(ge=1, le=MAX_SAMPLE_LINES)] = SAMPLE_LINES) -> HTMLResponse:
    # A first visit has no corpus in its query: the article's, with its marker. After that an
    # unticked checkbox is simply absent from the query, so absent means off.
    marker = True if corpus is None else end_of_word
    names = [row["name"] for row in list_names(session, web.team, Page(limit=MAX_LIMIT))[0]]
    corpora = corpus_options(session, web.team)
    values = {"corpus": DEFAULT_CORPUS if corpus is None else corpus, "tie_break": tie_break, "end_of_word": marker,
              "tokenizer": tokenizer or "", "version": version or "latest", "corpus_id": corpus_id or "",
              "lines": lines}
    context: dict[str, Any] = {"values": values, "names": names, "corpora": corpora, "tie_breaks": TIE_BREAKS,
                               "marker": END_OF_WORD, "max_characters": MAX_CHARACTERS, "max_lines": MAX_SAMPLE_LINES,
                               "error": None, "mode": "version" if tokenizer else "corpus"}
    try:
        body = request_body(corpus, tie_break, marker, step, tokenizer, version, corpus_id, lines)
        computed, about = compute(session, store, web.team, body, lambda: release(session), count=1)
    except InvalidInput as exc:  # the form says what to fix; a version or corpus not found is a 404 page
        return render(request, "bpe.html", web, status_code=exc.status, **{**context, "error": exc}, run=None)
    run = cast(Run, computed)  # without as_json, compute returns the Run itself (the JSON text is the API's)
    state = run.states[0]
    shown = shower(session, web.team, tokenizer, version)
    return render(request, "bpe.html", web, **context, run=run, about=about, state=state, heading=run_heading(about),
                  state_html=state_html(run, state, about, shown), lists_html=lists_html(run, state, shown),
                  carried=carried_fields(values, context["mode"]))


def carried_fields(values: dict[str, Any], mode: str) -> list[tuple[str, str]]:
    """The hidden fields the step buttons send again, so the next page shows the same run."""
    if mode == "version":
        return [(name, str(values[name])) for name in ("tokenizer", "version", "corpus_id", "lines")]
    fields = [("corpus", values["corpus"]), ("tie_break", values["tie_break"])]
    return fields + ([("end_of_word", "on")] if values["end_of_word"] else [])


@router.post("/bpe/steps")
def bpe_states(request: Request, body: BpeStepsIn, session: SessionDep, store: StoreDep,
               web: ScriptSessionDep) -> JSONResponse:
    """Up to WINDOW states from `start`, as the page's HTML, with the run's vocabulary and merges."""
    spend_dashboard_request(request, web.team)  # a window of the page: a few states, not a whole walk
    shown = shower(session, web.team, body.tokenizer, str(body.version))
    computed, about = compute(session, store, web.team, body, lambda: release(session), count=WINDOW)
    run = cast(Run, computed)  # without as_json, compute returns the Run itself
    return JSONResponse({
        "mode": about["mode"], "heading": run_heading(about), "total_steps": len(run.merges), "done": run.done,
        "next_start": run.next_start,
        "lists": lists_html(run, run.states[0], shown),
        "states": [{"step": s.step, "vocabulary_size": s.vocabulary_size, "html": state_html(run, s, about, shown)}
                   for s in run.states],
    })
