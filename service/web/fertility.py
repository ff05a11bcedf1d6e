"""The home page: the fertility matrix, its language breakdown, a per-name trend and the parity premium.

The numbers come from one call to `fertility_matrix`, the function behind
GET /v1/dashboard/fertility, in its detailed form: premiums of parallel corpora whose lines do
not align too (corpus-level, said so), with the tokens each premium divides. This module only
arranges them for people, and adds the notes of `floors` where a split regex cuts a language's
words below what any merge can mend.
"""

from collections import defaultdict
from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.deps import SessionDep, StoreDep
from service.web.auth import WebSessionDep
from service.web.charts import Axis, Bar, Series, bar_chart, line_chart
from service.web.floors import FloorNote, floor_notes, one_per_language, version_pattern
from service.web.render import WebRoute, render
from tokenmill.corpora.rows import newest_corpora
from tokenmill.db import release
from tokenmill.evaluation.reports import CORPUS_LEVEL, fertility_matrix, version_label
from tokenmill.models import Team, TokenizerVersion
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.playground.split_floor import REFERENCE_PATTERNS
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import list_names

router = APIRouter(route_class=WebRoute, include_in_schema=False)

HEAT_STEPS = 8
# A version whose fertility rises by more than this share over the previous one is flagged.
REGRESSION = 0.005


def heat_scale(cells: Iterable[dict[str, Any] | None]) -> tuple[float, float]:
    """The lowest and highest fertility among the cells that have one."""
    values = [cell["fertility"] for cell in cells if cell and cell.get("words")]
    return (min(values), max(values)) if values else (0.0, 0.0)


def heat_step(value: float, scale: tuple[float, float]) -> int:
    """0 (lowest fertility: fewest tokens per word) to HEAT_STEPS - 1 (highest)."""
    lo, hi = scale
    if hi <= lo:
        return 0
    return min(HEAT_STEPS - 1, int((value - lo) / (hi - lo) * HEAT_STEPS))


def regressions(values: list[float]) -> frozenset[int]:
    """Indices of values more than REGRESSION above the value before them."""
    return frozenset(i for i in range(1, len(values)) if values[i] > values[i - 1] * (1 + REGRESSION))


def trend_series(rows: list[dict[str, Any]], name: str) -> list[Series]:
    """Fertility per domain across the versions of one name, regressions flagged."""
    versions = sorted((r for r in rows if r["kind"] == "version" and r["name"] == name), key=lambda r: r["version"])
    by_domain: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for row in versions:
        for domain, cell in row["domains"].items():
            by_domain[domain].append((row["version"], cell["fertility"]))
    return [Series(domain, points, regressions([y for _, y in points])) for domain, points in sorted(by_domain.items())]


def compared_versions(series: list[Series]) -> int:
    """How many versions the trend has points for: a trend needs two."""
    return len({x for line in series for x, _ in line.points})


def regression_notes(series: list[Series]) -> list[str]:
    notes = []
    for line in series:
        for i in sorted(line.marked):
            (before_v, before), (v, value) = line.points[i - 1], line.points[i]
            notes.append(f"{line.label}: v{v:g} has {100 * (value / before - 1):.1f} % more tokens per word than v{before_v:g}")
    return notes


def count(tokens: int) -> str:
    """22.3k tokens: a token count short enough to follow a bar."""
    for size, suffix in ((1e6, "M"), (1e3, "k")):
        if tokens >= size:
            return f"{tokens / size:.1f}{suffix}"
    return str(tokens)


def premium_groups(rows: list[dict[str, Any]]) -> list[tuple[str, list[Bar]]]:
    """(language, bars) for the chart, each bar a subject's premium with its tokens; the group is
    named when there are several, and a corpus-level premium says so."""
    groups = sorted({group for row in rows for group in row["premium"]})
    categories: dict[str, list[Bar]] = defaultdict(list)
    for row in rows:
        details = row.get("premium_detail") or {}
        for group, languages in row["premium"].items():
            for language, value in languages.items():
                detail = details.get(group, {}).get(language) or {}
                label = language if len(groups) == 1 else f"{language} · {group}"
                if detail.get("measure") == CORPUS_LEVEL:
                    label += " (corpus-level)"
                note = f"{count(detail['tokens'])} tokens" if "tokens" in detail else ""
                categories[label].append(Bar(row["label"], value, note))
    return sorted(categories.items())


def premium_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every premium with what it divides, by group, language and subject (the chart's numbers, whole)."""
    table = []
    for row in rows:
        for group, languages in (row.get("premium_detail") or {}).items():
            for language, detail in languages.items():
                table.append({"group": group, "language": language, "subject": row["label"], **detail})
    return sorted(table, key=lambda r: (r["group"], r["language"] != r["pivot"], r["language"]))


def chart_rows(rows: list[dict[str, Any]], name: str | None) -> list[dict[str, Any]]:
    """The rows charts compare: every version of the chosen name, else each name's latest, and the references."""
    latest: dict[str, int] = {}
    for row in rows:
        if row["kind"] == "version":
            latest[row["name"]] = max(latest.get(row["name"], 0), row["version"])
    return [r for r in rows if r["kind"] == "reference" or (name and r["name"] == name)
            or (not name and r["version"] == latest.get(r["name"]))]


def split_notes(session: Session, store: ObjectStore, team: Team, rows: list[dict[str, Any]],
                languages: set[str]) -> list[FloorNote]:
    """Where the split of a charted tokenizer cuts a parallel language's words inside."""
    if not languages:
        return []
    shown = {(r["name"], r["version"]) for r in rows if r["kind"] == "version"}
    versions = [v for v in session.scalars(select(TokenizerVersion).where(TokenizerVersion.team_id == team.id))
                if (v.name, v.version) in shown]
    references = [r["name"] for r in rows if r["kind"] == "reference"]
    corpora = one_per_language(session.scalars(newest_corpora(team.id)), languages)
    release(session)  # the samples come from the store
    return floor_notes(store, corpora, [(version_label(v), version_pattern(v)) for v in versions],
                       [name for name in references if name in REFERENCE_PATTERNS])


@router.get("/")
def fertility_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep,
                   tokenizer: Annotated[str | None, Query(max_length=200)] = None,
                   trend: Annotated[str | None, Query(max_length=200)] = None) -> HTMLResponse:
    listed = list_names(session, web.team, Page(limit=MAX_LIMIT))[0]
    names = [row["name"] for row in listed]
    tokenizer = tokenizer or None
    matrix = fertility_matrix(session, web.team, tokenizer, detailed=True)
    rows = matrix["rows"]
    # The trend shown first is of a name with versions to compare, when one has.
    several = next((row["name"] for row in listed if row["versions"] > 1), None)
    trend_name = tokenizer or (trend if trend in names else None) or several or (names[0] if names else None)
    series = trend_series(rows, trend_name) if trend_name else []
    versions_compared = compared_versions(series)
    trend_chart = line_chart(series, Axis("version", integer=True), Axis("fertility (tokens per word)"),
                             title=f"Fertility per domain across the versions of {trend_name}", chart_id="trend")
    charted = chart_rows(rows, tokenizer)
    premium = premium_groups(charted)
    premium_chart = bar_chart(premium, value_label="premium (tokens / tokens of the pivot language)",
                              title="Parity premium per language, with each language's tokens", chart_id="premium",
                              reference=1.0)
    parallel = {language for row in charted for group in row["premium"].values() for language in group}
    notes = split_notes(session, store, web.team, charted, parallel)
    domain_scale = heat_scale(cell for row in rows for cell in row["domains"].values())
    language_scale = heat_scale(cell for row in rows for cell in row["languages"].values())
    return render(request, "fertility.html", web, matrix=matrix, names=names, tokenizer=tokenizer,
                  trend_name=trend_name, trend_chart=trend_chart, versions_compared=versions_compared,
                  notes=regression_notes(series), premium_chart=premium_chart, premium=premium,
                  premium_rows=premium_table(charted), floor_notes=notes, corpus_level=CORPUS_LEVEL,
                  domain_scale=domain_scale, language_scale=language_scale, heat_step=heat_step,
                  heat_steps=HEAT_STEPS)
