"""Request dependencies, declared once as Annotated aliases."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Header, Query, Request
from sqlalchemy.orm import Session

from service.queue import Queue
from tokenmill.models import Team
from tokenmill.pagination import MAX_LIMIT, Page
from tokenmill.settings import Settings
from tokenmill.store import ObjectStore
from tokenmill.teams import authenticate


def get_session(request: Request) -> Iterator[Session]:
    """A session per request: committed if the route returns, rolled back if it raises."""
    session = request.app.state.sessionmaker()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]


def get_store(request: Request) -> ObjectStore:
    return request.app.state.store


def get_queue(request: Request) -> Queue:
    return request.app.state.queue


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings


StoreDep = Annotated[ObjectStore, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
QueueDep = Annotated[Queue, Depends(get_queue)]


def bearer_key(authorization: Annotated[str | None, Header()] = None) -> str | None:
    if not authorization:
        return None
    scheme, _, key = authorization.partition(" ")
    return key.strip() if scheme.lower() == "bearer" else None


def get_team(session: SessionDep, key: Annotated[str | None, Depends(bearer_key)]) -> Team:
    return authenticate(session, key)


TeamDep = Annotated[Team, Depends(get_team)]


def get_page(
    page: Annotated[int, Query(ge=1)] = 1,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
) -> Page:
    return Page(page=page, limit=limit)


PageDep = Annotated[Page, Depends(get_page)]
