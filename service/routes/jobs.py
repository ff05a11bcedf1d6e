"""/v1/jobs: submit (idempotent), read, list, cancel."""

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from service.deps import ExpensiveTeamDep, PageDep, QueueDep, SessionDep, TeamDep, team_quotas
from service.inputs import check_text
from service.schemas import JobIn, JobOut, Listing
from tokenmill.jobs.submission import IDEMPOTENCY_FIELD, cancel_job, get_job, list_jobs, submit_job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


# An Idempotency-Key already used for the same request answers its job again, 200 rather than 202.
REPLAYED: dict[int | str, dict[str, Any]] = {
    200: {"model": JobOut, "description": "the job this Idempotency-Key made already (the request was the same)"}}


@router.post("", status_code=202, response_model=JobOut, responses=REPLAYED)
def create_job(
    request: Request,
    body: JobIn,
    session: SessionDep,
    queue: QueueDep,
    team: ExpensiveTeamDep,
    idempotency_key: Annotated[str | None, Header(max_length=200)] = None,
) -> JSONResponse:
    check_text(idempotency_key, IDEMPOTENCY_FIELD)
    job, created = submit_job(session, team, body.tokenizer, body.spec, body.train_corpora,
                              body.eval_corpora, idempotency_key, team_quotas(request, team.id).queued_jobs)
    session.commit()
    if created:
        queue.send_training(job.id)  # if the broker is away, the job stays queued and the sweeper sends it
    payload = JobOut.one(session, job).model_dump(mode="json")  # a replayed key may answer a finished job
    return JSONResponse(payload, status_code=202 if created else 200)


@router.get("", response_model=Listing[JobOut])
def read_jobs(session: SessionDep, team: TeamDep, page: PageDep, status: str | None = None) -> dict[str, Any]:
    rows, total = list_jobs(session, team, page, status)
    return {"items": JobOut.of(session, rows), "total": total, "page": page.page, "limit": page.limit}


@router.get("/{job_id}", response_model=JobOut)
def read_job(session: SessionDep, team: TeamDep, job_id: uuid.UUID) -> JobOut:
    return JobOut.one(session, get_job(session, team, job_id))


@router.post("/{job_id}/cancel", response_model=JobOut)
def cancel(session: SessionDep, team: TeamDep, job_id: uuid.UUID) -> JobOut:
    job = cancel_job(session, team, job_id)
    session.commit()
    return JobOut.one(session, job)
