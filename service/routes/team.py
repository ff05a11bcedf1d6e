"""GET /v1/team: the caller's team, its quotas and what it uses of them."""

from typing import Any

from fastapi import APIRouter, Request

from service.deps import SessionDep, TeamDep, team_quotas
from service.schemas import TeamOut
from service.uploads import uploads_in_flight
from tokenmill.quotas import usage_of

router = APIRouter(prefix="/v1", tags=["team"])


@router.get("/team", response_model=TeamOut)
def read_team(request: Request, session: SessionDep, team: TeamDep) -> dict[str, Any]:
    usage = usage_of(session, team.id).as_dict()
    return {"id": team.id, "name": team.name, "quotas": team_quotas(request, team.id).as_dict(),
            "usage": {**usage, "uploads_in_flight": uploads_in_flight(request, team.id)}}
