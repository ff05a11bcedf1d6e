"""The jobs page (live stage and progress, full errors, cancel), a job's own page, and the new-job form.

A job's page shows what it was asked (spec, corpora), how it went (stages with their times,
progress live while it runs, attempts, the error in full), and what it made (the version, the
vocabulary it reached and why it is smaller). The stages' times are what the rows keep: the
wait in the queue (created to started), the training (the version's train_seconds: counting,
learning, writing files) and the rest (evaluating and registering), to finished.

Submitting and cancelling call `submit_job` and `cancel_job`, commit, then enqueue, as
POST /v1/jobs does; a refused spec re-renders the form with the API's message and field.
Routes that read a form take it before their database session, so a slow client holds no
connection while its form arrives.
"""

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.datastructures import FormData

from service.deps import QueueDep, SessionDep, StoreDep, spend_dashboard_request, team_quotas
from service.inputs import MAX_PAGE
from service.schemas import JobOut
from service.web.auth import FormDep, WebSession, WebSessionDep
from service.web.job_advice import advice
from service.web.render import WebRoute, render, see_other, templates
from service.web.spec_form import SpecField, changed_advanced, form_values, spec_fields, spec_from_form, spec_values
from tokenmill.corpora.rows import newest_corpora
from tokenmill.db import release
from tokenmill.errors import InvalidInput, NotFound, OverQuota
from tokenmill.jobs.submission import IDEMPOTENCY_FIELD, cancel_job, get_job, list_jobs, submit_job
from tokenmill.models import FINISHED, Corpus, TokenizerVersion, TrainingJob
from tokenmill.pagination import Page, page_count
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import get_version

router = APIRouter(route_class=WebRoute, include_in_schema=False)

PER_PAGE = 50


@router.get("/jobs")
def jobs_page(request: Request, session: SessionDep, web: WebSessionDep,
              page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
              status: Annotated[str | None, Query(max_length=20)] = None) -> HTMLResponse:
    rows, total = list_jobs(session, web.team, Page(page=page, limit=PER_PAGE), status or None)
    jobs = JobOut.of(session, rows)  # as GET /v1/jobs shows them: with the vocabulary each version reached
    active = [job for job in jobs if job.status not in FINISHED]
    finished = [job for job in jobs if job.status in FINISHED]
    return render(request, "jobs.html", web, active=active, finished=finished, total=total, page=page,
                  pages=page_count(total, PER_PAGE), status=status or "", finished_statuses=FINISHED)


@router.get("/jobs/{job_id}/status", response_model=None)  # the dict as it is: its annotation is no response model
def job_status(session: SessionDep, web: WebSessionDep, job_id: uuid.UUID) -> dict[str, Any]:
    """What the jobs page polls every second while a job is queued or running."""
    job = JobOut.one(session, get_job(session, web.team, job_id))
    return job.model_dump(mode="json", include={"id", "status", "stage", "progress", "error", "version", "tokenizer"})


@router.post("/jobs/{job_id}/cancel")
def cancel(web: WebSessionDep, form: FormDep, session: SessionDep, job_id: uuid.UUID) -> RedirectResponse:
    job = cancel_job(session, web.team, job_id)
    session.commit()
    return see_other(f"/jobs/{job.id}" if form.get("back") == "job" else f"/jobs#job-{job.id}")


def form_corpora(session: Session, web: WebSession) -> list[Corpus]:
    """Every corpus of the team, newest first: what the job form offers."""
    return list(session.scalars(newest_corpora(web.team.id)))


def corpus_groups(corpora: list[Corpus]) -> list[dict[str, object]]:
    """The corpora as the form lists them: each parallel group together (its languages named, and
    whether their lines align), then the corpora in no group."""
    groups: dict[str | None, list[Corpus]] = {}
    for corpus in sorted(corpora, key=lambda c: (c.language, c.name)):
        groups.setdefault(corpus.parallel_group, []).append(corpus)
    out: list[dict[str, object]] = []
    for name in sorted(g for g in groups if g is not None) + ([None] if None in groups else []):
        members = groups[name]
        out.append({"name": name, "corpora": members, "languages": sorted({c.language for c in members}),
                    "aligned": len({c.lines for c in members}) == 1})
    return out


def _job_form(request: Request, session: Session, store: ObjectStore, web: WebSession, form: FormData | None = None,
              error: InvalidInput | OverQuota | None = None, like: dict[str, Any] | None = None) -> HTMLResponse:
    fields = spec_fields()
    if like is not None:
        chosen = {"train_corpora": list(like["train_corpora"]), "eval_corpora": []}
        values, tokenizer = spec_values(fields, like["spec"]), str(like["tokenizer"])
    else:
        chosen = {"train_corpora": form.getlist("train_corpora") if form else [],
                  "eval_corpora": form.getlist("eval_corpora") if form else []}
        values, tokenizer = form_values(fields, form), (str(form.get("tokenizer") or "") if form else "")
    # The form keeps its key across corrections; a key already spent on other values gets a fresh one.
    key = form.get("idempotency_key") if form and not (error and error.field == IDEMPOTENCY_FIELD) else None
    corpora = form_corpora(session, web)
    training = [c for c in corpora if str(c.id) in chosen["train_corpora"]]
    release(session)  # the advice may read corpus samples from the store
    spec = spec_from_form(fields, _as_form(fields, values))
    advanced_error = bool(error and error.field and error.field.startswith("spec.")
                          and not next((f.basic for f in fields if f.input_name == error.field.split("[")[0]), True))
    return render(request, "job_form.html", web, status_code=error.status if error else 200, fields=fields,
                  values=values, corpora=corpora, groups=corpus_groups(corpora), chosen=chosen, tokenizer=tokenizer,
                  error=error, idempotency_key=key or uuid.uuid4().hex,
                  open_advanced=advanced_error or changed_advanced(fields, values),
                  advice=advice(store, spec, training))


def _as_form(fields: list[SpecField], values: dict[str, str]) -> FormData:
    """Input values as the browser would post them (an unticked checkbox posts nothing)."""
    return FormData([(f.input_name, values[f.name]) for f in fields
                     if not (f.kind == "bool" and not f.optional and values[f.name] != "true")])


def like_version(session: Session, web: WebSession, like: str, parity: str | None,
                 tokenizer: str | None) -> dict[str, Any] | None:
    """The form filled in to train like a version ("name@number"): its spec (parity as asked), its
    training corpora, and a name; None when there is no such version."""
    name, _, number = like.rpartition("@")
    try:
        row = get_version(session, web.team, name, number or "latest")
    except (NotFound, InvalidInput):
        return None
    spec = dict(row.spec)
    if parity in ("true", "false"):
        spec["parity"] = parity == "true"
    return {"spec": spec, "train_corpora": [str(c["id"]) for c in row.lineage.get("corpora", [])],
            "tokenizer": tokenizer or row.name}


@router.get("/jobs/new")
def new_job_page(request: Request, session: SessionDep, store: StoreDep, web: WebSessionDep,
                 like: Annotated[str | None, Query(max_length=250)] = None,
                 parity: Annotated[str | None, Query(max_length=10)] = None,
                 tokenizer: Annotated[str | None, Query(max_length=200)] = None) -> HTMLResponse:
    """The form; `like=name@version` fills it in to train like that version (`parity` turned as asked)."""
    filled = like_version(session, web, like, parity, tokenizer) if like else None
    return _job_form(request, session, store, web, like=filled)


@router.post("/jobs/new/advice")
def job_advice(web: WebSessionDep, form: FormDep, session: SessionDep, store: StoreDep) -> JSONResponse:
    """What the form would start, as the page's script asks while the form is filled in."""
    fields = spec_fields()
    ids = set(form.getlist("train_corpora"))
    training = [c for c in form_corpora(session, web) if str(c.id) in ids]
    session.commit()
    notes = advice(store, spec_from_form(fields, form), training)
    return JSONResponse({"html": templates.env.get_template("_advice.html").render(advice=notes)})


STAGES = ("queued", "starting", "counting", "merging counts", "training", "exporting", "evaluating",
          "evaluating references", "registering", "done")


def stage_times(job: JobOut, version: TokenizerVersion | None) -> list[dict[str, object]]:
    """(what, began, seconds) of each part of a job's run the rows can tell apart."""
    parts: list[dict[str, object]] = [{"stage": "waiting in the queue", "began": job.created_at,
                                       "seconds": _seconds(job.created_at, job.started_at)}]
    if job.started_at is None:
        return parts
    end = job.finished_at
    if version is not None and version.job_id == job.id and end is not None:
        trained = version.train_seconds
        parts.append({"stage": "counting, training and writing files", "began": job.started_at, "seconds": trained})
        parts.append({"stage": "evaluating and registering", "began": None,
                      "seconds": max(0.0, (end - job.started_at).total_seconds() - trained)})
    else:
        parts.append({"stage": f"running ({job.stage})" if end is None else job.stage, "began": job.started_at,
                      "seconds": _seconds(job.started_at, end)})
    if end is not None:
        parts.append({"stage": job.status, "began": end, "seconds": None})
    return parts


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def job_corpora(session: Session, web: WebSession, ids: list[str]) -> list[dict[str, object]]:
    """The corpora a job names, as rows (a deleted one by its id alone)."""
    parsed = [uuid.UUID(i) for i in ids]
    found = {c.id: c for c in session.scalars(select(Corpus).where(Corpus.team_id == web.team.id, Corpus.id.in_(parsed)))}
    return [{"id": str(i), "corpus": found.get(i)} for i in parsed]


@router.get("/jobs/{job_id}")
def job_page(request: Request, session: SessionDep, web: WebSessionDep, job_id: uuid.UUID) -> HTMLResponse:
    row: TrainingJob = get_job(session, web.team, job_id)
    job = JobOut.one(session, row)
    version = session.scalar(select(TokenizerVersion).where(TokenizerVersion.job_id == row.id))
    every = not job.eval_corpora
    return render(request, "job.html", web, job=job, version=version, stages=stage_times(job, version),
                  stage_order=STAGES, train=job_corpora(session, web, job.train_corpora),
                  evaluated=[] if every else job_corpora(session, web, job.eval_corpora), every_corpus=every,
                  max_attempts=request.app.state.settings.job_max_attempts, finished_statuses=FINISHED,
                  spec=sorted(job.spec.items(), key=lambda item: _spec_order(item[0])))


def _spec_order(name: str) -> int:
    fields = [f.name for f in spec_fields()]
    return fields.index(name) if name in fields else len(fields)


@router.post("/jobs/new")
def submit(request: Request, web: WebSessionDep, form: FormDep, session: SessionDep, store: StoreDep,
           queue: QueueDep) -> Response:
    if form.get("check"):  # "Check these choices": the form again, with what it would do
        return _job_form(request, session, store, web, form)
    spend_dashboard_request(request, web.team)
    eval_corpora = _texts(form, "eval_corpora")
    try:
        job, created = submit_job(session, web.team, str(form.get("tokenizer") or "").strip(),
                                  spec_from_form(spec_fields(), form), _texts(form, "train_corpora"),
                                  eval_corpora or None, str(form.get("idempotency_key") or "") or None,
                                  team_quotas(request, web.team.id).queued_jobs)
    except (InvalidInput, OverQuota) as exc:
        session.rollback()
        return _job_form(request, session, store, web, form, exc)
    session.commit()
    if created:
        queue.send_training(job.id)  # if the broker is away, the job stays queued and the sweeper sends it
    return see_other(f"/jobs/{job.id}")


def _texts(form: FormData, name: str) -> list[str]:
    """A repeated field's values as text: what the core reads of them anyway (it takes str() of each id,
    of a file posted under the name too)."""
    return [str(value) for value in form.getlist(name)]
