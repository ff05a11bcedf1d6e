"""The corpora page (upload form and list) and a corpus page with its statistics and Zipf and Heaps plots.

The list says each corpus's share of exact-duplicate documents, and the team's across its corpora
(tokenmill.corpora.duplicates, as GET /v1/corpora/duplicates answers it: merged from the hashes the
statistics stored, bounded, kept per set of corpora); a store that does not answer leaves it out.

Both show each corpus's id, to copy into API calls, and a delete button: a CSRF-checked POST
that calls the handler of DELETE /v1/corpora/{id} itself (the row and, through it, the
corpus's evaluations go; then the stored object), and comes back to the list.

The upload takes the one path of POST /v1/corpora (service/uploads.py `ingest_upload`): the
form is read as it arrives, its file streamed to the store in an upload thread (never in the
pool that serves the pages and the API's reads), under the team's quotas (the request rate of
the team's dashboard, concurrent uploads, corpora, storage), then the statistics task is
queued; no session is held while the form arrives or the file streams. Its own parts: the
CSRF token must come before the file (the page's form puts it first), and every refusal
answers with the form again, saying what to fix. Without script the form posts and the
browser follows the redirect; the page's script posts the same form with XMLHttpRequest (to
show progress) and asks for JSON.
"""

import functools
import math
import uuid
from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from markupsafe import Markup
from sqlalchemy.orm import Session

from service.deps import SessionDep, StoreDep, spend_request
from service.inputs import MAX_PAGE, check_values
from service.problems import domain_problem
from service.uploads import MultipartUpload, ingest_upload, run_upload
from service.web.auth import CSRF_FIELD, CsrfRejected, FormDep, WebSession, WebSessionDep
from service.web.charts import Axis, Series, line_chart
from service.web.render import WebRoute, render, see_other, wants_json
from tokenmill.corpora.duplicates import TeamDuplicates, hashed_corpora, team_duplicates
from tokenmill.corpora.ingest import NAMED_FIELDS
from tokenmill.corpora.reading import FORMATS
from tokenmill.corpora.rows import delete_corpus, get_corpus, newest_corpora
from tokenmill.db import release
from tokenmill.errors import InvalidInput, TokenmillError
from tokenmill.pagination import Page, page_count, paginate
from tokenmill.store import TRANSIENT_ERRORS

router = APIRouter(route_class=WebRoute, include_in_schema=False)

PER_PAGE = 50
FIELDS = ("name", "domain", "language", "format", "text_field", "parallel_group")


def _corpora_page(request: Request, session: Session, web: WebSession, page: int, form: Mapping[str, str] | None = None,
                  error: TokenmillError | None = None, deleted: str | None = None) -> HTMLResponse:
    rows, total = paginate(session, newest_corpora(web.team.id), Page(page=page, limit=PER_PAGE))
    values = {name: str(form.get(name) or "") for name in FIELDS} if form else {"format": ""}
    duplicates = _team_duplicates(request, session, web.team.id)
    return render(request, "corpora.html", web, status_code=error.status if error else 200, corpora=rows, total=total,
                  page=page, pages=page_count(total, PER_PAGE), formats=FORMATS, values=values, error=error,
                  deleted=deleted, duplicates=duplicates)


def _team_duplicates(request: Request, session: Session, team_id: uuid.UUID) -> TeamDuplicates | None:
    """The exact duplicates across the team's corpora; None when the store did not answer."""
    corpora = hashed_corpora(session, team_id)
    release(session)  # the merge reads the store
    try:
        return team_duplicates(request.app.state.store, corpora, request.app.state.settings.duplicates_max_documents)
    except TRANSIENT_ERRORS:
        return None


@router.get("/corpora")
def corpora_page(request: Request, session: SessionDep, web: WebSessionDep,
                 page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
                 deleted: Annotated[str | None, Query(max_length=200)] = None) -> HTMLResponse:
    return _corpora_page(request, session, web, page, deleted=deleted)


@router.post("/corpora/{corpus_id}/delete")
def delete(web: WebSessionDep, form: FormDep, session: SessionDep, store: StoreDep,
           corpus_id: uuid.UUID) -> RedirectResponse:
    """Delete a corpus as DELETE /v1/corpora/{id} does (committed), then list the rest."""
    name = delete_corpus(session, store, web.team, corpus_id, lambda: release(session)).name
    return see_other(f"/corpora?deleted={quote(name, safe='')}")


@router.post("/corpora")
async def upload(request: Request, web: WebSessionDep) -> Response:
    """Upload a corpus as POST /v1/corpora does, then show it; a refusal shows the form again with the reason."""
    fields: dict[str, str] = {}  # as far as they were read
    try:
        await run_upload(spend_request, request, web.team, f"team:{web.team.id}")
        form = MultipartUpload(request, before_file=NAMED_FIELDS)
        fields = form.fields
        corpus = await ingest_upload(request, form, web.team, check=functools.partial(_check_form, web))
    except TokenmillError as exc:  # InvalidInput, InvalidCorpus, TooLarge, OverQuota: the form says what to fix
        if wants_json(request):
            return domain_problem(request, exc)
        return await run_upload(_form_again, request, web, fields, exc)
    location = f"/corpora/{corpus.id}"
    if wants_json(request):
        return JSONResponse({"id": str(corpus.id), "location": location}, status_code=201)
    return see_other(location)


def _check_form(web: WebSession, form: MultipartUpload) -> None:
    # The fields before the file, before its first byte is read: the session's CSRF token among them.
    if not web.accepts(form.fields.get(CSRF_FIELD)):
        raise CsrfRejected()
    check_values(form.fields.items())
    if not form.filename:
        raise InvalidInput("choose a file to upload", field="file")


def _form_again(request: Request, web: WebSession, fields: Mapping[str, str],
                error: TokenmillError) -> HTMLResponse:
    with request.app.state.sessionmaker() as session:
        page = _corpora_page(request, session, web, 1, fields, error)
    page.headers.update(error.headers())  # Retry-After, where waiting helps
    return page


def zipf_chart(statistics: dict[str, Any]) -> Markup:
    """Frequency against rank, log-log, with a line of the fitted Zipf exponent through the points' centre."""
    points = [(x, y) for x, y in statistics.get("zipf_points") or [] if x > 0 and y > 0]
    series = [Series("words", points)]
    exponent = statistics.get("zipf_exponent") or 0.0
    if len(points) > 1 and exponent:
        mean_x = sum(math.log(x) for x, _ in points) / len(points)
        mean_y = sum(math.log(y) for _, y in points) / len(points)
        ends = (points[0][0], points[-1][0])
        fit = [(x, math.exp(mean_y - exponent * (math.log(x) - mean_x))) for x in ends]
        series.append(Series(f"fit: frequency ∝ rank^−{exponent:.2f}", fit, dashed=True))
    return line_chart(series, Axis("rank", log=True), Axis("frequency", log=True),
                      title="Zipf: word frequency against rank (log-log)", chart_id="zipf")


def heaps_chart(statistics: dict[str, Any]) -> Markup:
    """Distinct words against words read, log-log, with the fitted Heaps curve K·n^β."""
    points = [(x, y) for x, y in statistics.get("heaps_points") or [] if x > 0 and y > 0]
    series = [Series("distinct words", points)]
    k, beta = statistics.get("heaps_k") or 0.0, statistics.get("heaps_beta") or 0.0
    if len(points) > 1 and k:
        ends = (points[0][0], points[-1][0])
        series.append(Series(f"fit: {k:.1f}·n^{beta:.2f}", [(x, k * x**beta) for x in ends], dashed=True))
    return line_chart(series, Axis("words read", log=True), Axis("distinct words", log=True),
                      title="Heaps: vocabulary growth (log-log)", chart_id="heaps")


@router.get("/corpora/{corpus_id}")
def corpus_page(request: Request, session: SessionDep, web: WebSessionDep, corpus_id: uuid.UUID) -> HTMLResponse:
    corpus = get_corpus(session, web.team, corpus_id)
    statistics = corpus.statistics
    charts = (zipf_chart(statistics), heaps_chart(statistics)) if statistics else ()
    return render(request, "corpus.html", web, corpus=corpus, statistics=statistics, charts=charts)

