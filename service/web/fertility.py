"""The home page: the fertility matrix, its language breakdown, a per-name trend and the parity premium.

Everything on it comes from one call to `fertility_matrix`, the function behind
GET /v1/dashboard/fertility; this module only arranges its numbers for people.
"""

from collections import defaultdict
from collections.abc import Iterable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from service.deps import SessionDep
from service.web.auth import WebSessionDep
from service.web.charts import Axis, Series, bar_chart, line_chart
from service.web.render import WebRoute, render
from tokenmill.evaluation.reports import fertility_matrix
from tokenmill.pagination import MAX_LIMIT, Page
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


def regression_notes(series: list[Series]) -> list[str]:
    notes = []
    for line in series:
        for i in sorted(line.marked):
            (before_v, before), (v, value) = line.points[i - 1], line.points[i]
            notes.append(f"{line.label}: v{v:g} has {100 * (value / before - 1):.1f} % more tokens per word than v{before_v:g}")
    return notes


def premium_groups(rows: list[dict[str, Any]]) -> list[tuple[str, list[tuple[str, float]]]]:
    """(language, [(subject, premium)]) for the chart; the group is named when there are several."""
    groups = sorted({group for row in rows for group in row["premium"]})
    categories: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for row in rows:
        for group, languages in row["premium"].items():
            for language, value in languages.items():
                label = language if len(groups) == 1 else f"{language} · {group}"
                categories[label].append((row["label"], value))
    return sorted(categories.items())


def chart_rows(rows: list[dict[str, Any]], name: str | None) -> list[dict[str, Any]]:
    """The rows charts compare: every version of the chosen name, else each name's latest, and the references."""
    latest: dict[str, int] = {}
    for row in rows:
        if row["kind"] == "version":
            latest[row["name"]] = max(latest.get(row["name"], 0), row["version"])
    return [r for r in rows if r["kind"] == "reference" or (name and r["name"] == name)
            or (not name and r["version"] == latest.get(r["name"]))]


@router.get("/")
def fertility_page(request: Request, session: SessionDep, web: WebSessionDep,
                   tokenizer: Annotated[str | None, Query(max_length=200)] = None,
                   trend: Annotated[str | None, Query(max_length=200)] = None):
    names = [row["name"] for row in list_names(session, web.team, Page(limit=MAX_LIMIT))[0]]
    tokenizer = tokenizer or None
    matrix = fertility_matrix(session, web.team, tokenizer)
    rows = matrix["rows"]
    trend_name = tokenizer or (trend if trend in names else None) or (names[0] if names else None)
    series = trend_series(rows, trend_name) if trend_name else []
    trend_chart = line_chart(series, Axis("version", integer=True), Axis("fertility (tokens per word)"),
                             title=f"Fertility per domain across the versions of {trend_name}", chart_id="trend")
    premium = premium_groups(chart_rows(rows, tokenizer))
    premium_chart = bar_chart(premium, value_label="parity premium (tokens / tokens of the pivot language)",
                              title="Parity premium per language", chart_id="premium", reference=1.0)
    domain_scale = heat_scale(cell for row in rows for cell in row["domains"].values())
    language_scale = heat_scale(cell for row in rows for cell in row["languages"].values())
    return render(request, "fertility.html", web, matrix=matrix, names=names, tokenizer=tokenizer,
                  trend_name=trend_name, trend_chart=trend_chart, notes=regression_notes(series),
                  premium_chart=premium_chart, premium=premium, domain_scale=domain_scale,
                  language_scale=language_scale, heat_step=heat_step, heat_steps=HEAT_STEPS)
