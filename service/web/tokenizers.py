"""A tokenizer's page: its versions, their specs side by side, the diff between any two, and the
fertility of each on the team's corpora next to the references.

The specs and the fertility show the newest SHOWN versions (every version is listed above them);
the diff compares any two, newest and the one before unless the form asks otherwise, with
`versions_diff`, the function behind the version page's "Changes since".
"""

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from service.deps import SessionDep, StoreDep
from service.web.auth import WebSessionDep
from service.web.render import WebRoute, render
from service.web.tokens import version_labeller
from service.web.versions import DIFF_SHOWN, spec_items
from tokenmill.db import release
from tokenmill.evaluation.references import BASELINES
from tokenmill.evaluation.reports import latest_evaluations, subject_of, version_label
from tokenmill.models import Corpus, Evaluation, TokenizerVersion
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.versions.diff import versions_diff
from tokenmill.versions.registry import list_versions

router = APIRouter(route_class=WebRoute, include_in_schema=False)

SHOWN = 6


def spec_rows(versions: Sequence[TokenizerVersion]) -> list[dict[str, Any]]:
    """One row per spec field (TrainingSpec's order): each version's value, and whether they differ."""
    names = [name for name, _ in spec_items({k: None for v in versions for k in v.spec})]
    rows = []
    for name in names:
        values = [v.spec.get(name) for v in versions]
        rows.append({"field": name, "values": values, "differs": any(value != values[0] for value in values)})
    return rows


def fertility_rows(pairs: list[tuple[Evaluation, Corpus]], versions: Sequence[TokenizerVersion],
                   references: Sequence[str]) -> list[dict[str, Any]]:
    """Per corpus: the fertility (and tokens) of each version and reference that measured it."""
    keys = [("version", str(v.id)) for v in versions] + [("reference", r) for r in references]
    by_corpus: dict[Any, dict[str, Any]] = {}
    for evaluation, corpus in pairs:
        row = by_corpus.setdefault(corpus.id, {"corpus": corpus, "cells": {}})
        row["cells"][subject_of(evaluation)] = evaluation.metrics
    out = []
    for row in sorted(by_corpus.values(), key=lambda r: (r["corpus"].domain, r["corpus"].language, r["corpus"].name)):
        cells = [row["cells"].get(key) for key in keys]
        if not any(cells[: len(versions)]):
            continue  # a corpus none of the versions shown was evaluated on
        own = [c["fertility"] for c in cells[: len(versions)] if c]
        out.append({"corpus": row["corpus"], "cells": cells, "best": min(own) if own else None})
    return out


@router.get("/tokenizers/{name}/versions")
def versions_list(name: str) -> RedirectResponse:
    """The API's list has a page of its own on the dashboard: the tokenizer's."""
    return RedirectResponse(f"/tokenizers/{name}", status_code=307)


@router.get("/tokenizers/{name}")
def tokenizer_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep, name: str,
                   a: Annotated[int | None, Query(ge=1)] = None,
                   b: Annotated[int | None, Query(ge=1)] = None) -> HTMLResponse:
    versions, total = list_versions(session, web.team, name, Page(limit=MAX_LIMIT))  # newest first; 404 if none
    by_number = {v.version: v for v in versions}
    shown = sorted(versions[:SHOWN], key=lambda v: v.version)
    newer = by_number.get(b or 0) or versions[0]
    older = by_number.get(a or 0) or next((v for v in versions if v.version < newer.version), None)
    pairs = latest_evaluations(session, web.team, [v.id for v in shown], BASELINES)
    release(session)  # the diff reads two tokenizer.json files from the store
    diff = versions_diff(store, older, newer) if older and older.id != newer.id else None
    return render(request, "tokenizer.html", web, tokenizer=name, versions=versions, total=total, shown=shown,
                  labels={v.id: version_label(v) for v in versions}, specs=spec_rows(shown),
                  fertility=fertility_rows(pairs, shown, BASELINES), references=BASELINES,
                  older=older, newer=newer, diff=diff, diff_shown=DIFF_SHOWN,
                  readable_new=version_labeller(newer.spec),
                  readable_old=version_labeller(older.spec) if older else None)
