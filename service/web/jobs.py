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
from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy import select
from sqlalchemy.orm import Session

from service.deps import QueueDep, SessionDep, spend_dashboard_request, team_quotas
from service.inputs import MAX_PAGE
from service.schemas import JobOut
from service.web.auth import FormDep, WebSession, WebSessionDep
from service.web.render import WebRoute, render, see_other
from service.web.spec_form import form_values, spec_fields, spec_from_form
from tokenmill.errors import InvalidInput, OverQuota
from tokenmill.jobs.submission import IDEMPOTENCY_FIELD, cancel_job, get_job, list_jobs, submit_job
from tokenmill.models import FINISHED, Corpus, TokenizerVersion, TrainingJob
from tokenmill.pagination import Page, page_count

router = APIRouter(route_class=WebRoute, include_in_schema=False)

PER_PAGE = 50


@router.get("/jobs")
def jobs_page(request: Request, session: SessionDep, web: WebSessionDep,
              page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
              status: Annotated[str | None, Query(max_length=20)] = None):
    rows, total = list_jobs(session, web.team, Page(page=page, limit=PER_PAGE), status or None)
    jobs = JobOut.of(session, rows)  # as GET /v1/jobs shows them: with the vocabulary each version reached
    active = [job for job in jobs if job.status not in FINISHED]
    finished = [job for job in jobs if job.status in FINISHED]
    return render(request, "jobs.html", web, active=active, finished=finished, total=total, page=page,
                  pages=page_count(total, PER_PAGE), status=status or "", finished_statuses=FINISHED)


@router.get("/jobs/{job_id}/status")
def job_status(session: SessionDep, web: WebSessionDep, job_id: uuid.UUID):
    """What the jobs page polls every second while a job is queued or running."""
    job = JobOut.one(session, get_job(session, web.team, job_id))
    return job.model_dump(mode="json", include={"id", "status", "stage", "progress", "error", "version", "tokenizer"})


@router.post("/jobs/{job_id}/cancel")
def cancel(web: WebSessionDep, form: FormDep, session: SessionDep, job_id: uuid.UUID):
    job = cancel_job(session, web.team, job_id)
    session.commit()
    return see_other(f"/jobs/{job.id}" if form.get("back") == "job" else f"/jobs#job-{job.id}")


def team_corpora(session: Session, web: WebSession) -> list[Corpus]:
    return list(session.scalars(select(Corpus).where(Corpus.team_id == web.team.id).order_by(Corpus.created_at.desc())))


def _job_form(request: Request, session: Session, web: WebSession, form=None,
              error: InvalidInput | OverQuota | None = None):
    fields = spec_fields()
    chosen = {"train_corpora": form.getlist("train_corpora") if form else [],
              "eval_corpora": form.getlist("eval_corpora") if form else []}
    # The form keeps its key across corrections; a key already spent on other values gets a fresh one.
    key = form.get("idempotency_key") if form and not (error and error.field == IDEMPOTENCY_FIELD) else None
    return render(request, "job_form.html", web, status_code=error.status if error else 200, fields=fields,
                  values=form_values(fields, form), corpora=team_corpora(session, web), chosen=chosen,
                  tokenizer=(form.get("tokenizer") or "") if form else "", error=error,
                  idempotency_key=key or uuid.uuid4().hex)


@router.get("/jobs/new")
def new_job_page(request: Request, session: SessionDep, web: WebSessionDep):
    return _job_form(request, session, web)


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
                      "seconds": max(0.0, _seconds(job.started_at, end) - trained)})
    else:
        parts.append({"stage": f"running ({job.stage})" if end is None else job.stage, "began": job.started_at,
                      "seconds": _seconds(job.started_at, end)})
    if end is not None:
        parts.append({"stage": job.status, "began": end, "seconds": None})
    return parts


def _seconds(start, end) -> float | None:
    return None if start is None or end is None else (end - start).total_seconds()


def job_corpora(session: Session, web: WebSession, ids: list[str]) -> list[dict[str, object]]:
    """The corpora a job names, as rows (a deleted one by its id alone)."""
    parsed = [uuid.UUID(i) for i in ids]
    found = {c.id: c for c in session.scalars(select(Corpus).where(Corpus.team_id == web.team.id, Corpus.id.in_(parsed)))}
    return [{"id": str(i), "corpus": found.get(i)} for i in parsed]


@router.get("/jobs/{job_id}")
def job_page(request: Request, session: SessionDep, web: WebSessionDep, job_id: uuid.UUID):
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
def submit(request: Request, web: WebSessionDep, form: FormDep, session: SessionDep, queue: QueueDep):
    spend_dashboard_request(request, web.team)
    eval_corpora = form.getlist("eval_corpora")
    try:
        job, created = submit_job(session, web.team, str(form.get("tokenizer") or "").strip(),
                                  spec_from_form(spec_fields(), form), form.getlist("train_corpora"),
                                  eval_corpora or None, str(form.get("idempotency_key") or "") or None,
                                  team_quotas(request, web.team.id).queued_jobs)
    except (InvalidInput, OverQuota) as exc:
        session.rollback()
        return _job_form(request, session, web, form, exc)
    session.commit()
    if created:
        queue.send_training(job.id)  # if the broker is away, the job stays queued and the sweeper sends it
    return see_other(f"/jobs/{job.id}")
