"""Request dependencies, declared once as Annotated aliases."""

import time
import uuid
from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session, sessionmaker

from service.inputs import MAX_PAGE
from service.middleware import KEY_STATE, TEAM_STATE
from service.queue import Queue
from tokenmill.errors import Unauthorized
from tokenmill.models import Team
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.quotas import Quotas, quotas_of
from tokenmill.settings import Settings
from tokenmill.store import ObjectStore


def get_session(request: Request) -> Iterator[Session]:
    """A session per request: committed if the route returns, rolled back if it raises.

    A dashboard route's errors become pages inside the route (service.web.render.WebRoute), so
    they never reach this dependency; it keeps the session on `request.state` for WebRoute to
    roll back before the page is answered (the commit here then commits nothing)."""
    session = request.app.state.sessionmaker()
    request.state.session = session
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def get_sessionmaker(request: Request) -> sessionmaker[Session]:
    """For routes that must not hold a session while they stream: they open short transactions."""
    factory: sessionmaker[Session] = request.app.state.sessionmaker
    return factory


SessionmakerDep = Annotated[sessionmaker[Session], Depends(get_sessionmaker)]


def get_store(request: Request) -> ObjectStore:
    store: ObjectStore = request.app.state.store
    return store


def get_queue(request: Request) -> Queue:
    queue: Queue = request.app.state.queue
    return queue


def get_app_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


StoreDep = Annotated[ObjectStore, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
QueueDep = Annotated[Queue, Depends(get_queue)]


# Declares the scheme in the OpenAPI document; the key itself was checked by the Authentication middleware.
API_KEY = HTTPBearer(auto_error=False, description="the team's API key")


def get_team(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(API_KEY)]) -> Team:
    """The team whose API key the Authentication middleware found (it answers 401 itself otherwise)."""
    team: Team | None = getattr(request.state, TEAM_STATE, None)
    if team is None:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    return team


TeamDep = Annotated[Team, Depends(get_team)]

QUOTAS_FRESH_SECONDS = 5.0  # how long an API process trusts a team's quotas it read (the operator's change waits that long)


def team_quotas(request: Request, team_id: uuid.UUID) -> Quotas:
    """The team's quotas, read from the database at most every few seconds per API process."""
    cache: dict[uuid.UUID, tuple[float, Quotas]] = request.app.state.quota_cache
    now = time.monotonic()
    cached = cache.get(team_id)
    if cached is not None and now - cached[0] < QUOTAS_FRESH_SECONDS:
        return cached[1]
    with request.app.state.sessionmaker() as session:
        quotas = quotas_of(session, team_id, request.app.state.settings)
    cache[team_id] = (now, quotas)
    return quotas


def spend_request(request: Request, team: Team, bucket: str, cost: int = 1) -> None:
    """Take `cost` tokens of an expensive request from `bucket` (an API key's, or a team's
    dashboard); 429 problem+json when it is empty (service/rate_limits.py)."""
    request.app.state.rate_limits.take(bucket, team_quotas(request, team.id).requests_per_minute, cost)


def spend_dashboard_request(request: Request, team: Team, cost: int = 1) -> None:
    """An expensive dashboard request: a team's signed-in sessions share one bucket."""
    spend_request(request, team, f"team:{team.id}", cost)


def get_rate_limited_team(request: Request, team: TeamDep) -> Team:
    """The team, once its API key's bucket gave a token for this expensive request."""
    key = getattr(request.state, KEY_STATE, None)
    if key is None:
        spend_dashboard_request(request, team)
    else:
        spend_request(request, team, key)
    return team


# The team of an expensive /v1 request: encode, BPE steps, cost report, upload, job submission.
ExpensiveTeamDep = Annotated[Team, Depends(get_rate_limited_team)]

# BPE steps answer up to a few megabytes of states that the API process builds: ten tokens each.
BPE_STEPS_COST = 10


def get_bpe_steps_team(request: Request, team: TeamDep) -> Team:
    """The team, once its API key's bucket gave BPE_STEPS_COST tokens."""
    spend_request(request, team, getattr(request.state, KEY_STATE, None) or f"team:{team.id}", BPE_STEPS_COST)
    return team


BpeStepsTeamDep = Annotated[Team, Depends(get_bpe_steps_team)]


def get_page(
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
) -> Page:
    return Page(page=page, limit=limit)


PageDep = Annotated[Page, Depends(get_page)]
