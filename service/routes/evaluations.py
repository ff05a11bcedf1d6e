"""/v1/evaluations (queued like training), the fertility matrix, and reference playground encoding."""

import uuid
from typing import Any

from fastapi import APIRouter, Request

from service.deps import ExpensiveTeamDep, QueueDep, SessionDep, TeamDep, team_quotas
from service.parameters import ReferencePath
from service.schemas import EncodeIn, EncodeOut, EvaluationIn
from service.schemas_evaluations import EvaluationRunOut, FertilityMatrixOut
from tokenmill.evaluation.reports import fertility_matrix
from tokenmill.evaluation.submission import get_run, run_out, submit_run
from tokenmill.playground.encode import encode_with_reference

router = APIRouter(prefix="/v1", tags=["evaluations"])


@router.post("/evaluations", status_code=202, response_model=EvaluationRunOut)
def create_evaluation(request: Request, body: EvaluationIn, session: SessionDep, queue: QueueDep,
                      team: ExpensiveTeamDep) -> dict[str, Any]:
    run = submit_run(session, team, body.tokenizer, body.version, body.reference, body.corpora,
                     team_quotas(request, team.id).queued_jobs, whole=body.whole)
    session.commit()
    queue.send_evaluation(run.id)  # if the broker is away, the run stays queued and the sweeper sends it
    return run_out(session, run)


@router.get("/evaluations/{run_id}", response_model=EvaluationRunOut)
def read_evaluation(session: SessionDep, team: TeamDep, run_id: uuid.UUID) -> dict[str, Any]:
    return run_out(session, get_run(session, team, run_id))


@router.get("/dashboard/fertility", response_model=FertilityMatrixOut)
def dashboard_fertility(session: SessionDep, team: TeamDep, tokenizer: str | None = None) -> dict[str, Any]:
    return fertility_matrix(session, team, tokenizer)


@router.post("/references/{name}/encode", response_model=EncodeOut)
def encode_reference(body: EncodeIn, team: ExpensiveTeamDep, name: ReferencePath) -> dict[str, Any]:
    return encode_with_reference(name, body.text)
