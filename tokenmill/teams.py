"""Teams, their API keys and their dashboard sessions. A key is shown once; only its SHA-256 is stored."""

import hashlib
import secrets
import uuid

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from tokenmill.db import utcnow
from tokenmill.errors import Conflict, NotFound, Unauthorized
from tokenmill.models import ApiKey, Team, WebSession

KEY_PREFIX = "tm_"


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_team(session: Session, name: str) -> tuple[Team, str]:
    """A new team and its first API key (the plain key is returned, never stored)."""
    if session.scalar(select(Team).where(Team.name == name)) is not None:
        raise Conflict(f"a team named {name!r} already exists", field="name")
    team = Team(name=name)
    session.add(team)
    session.flush()
    return team, issue_key(session, team)


def issue_key(session: Session, team: Team) -> str:
    """A new API key for the team."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiKey(team_id=team.id, key_hash=hash_key(key), prefix=key[:10]))
    session.flush()
    return key


def revoke_key(session: Session, key: str) -> None:
    """Revoke a key: requests carrying it answer 401 from now on."""
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(key)))
    if row is None:
        raise NotFound("no such API key")
    row.revoked_at = utcnow()


def authenticate(session: Session, key: str | None) -> Team:
    """The team a live API key belongs to."""
    if not key:
        raise Unauthorized("missing API key: send 'Authorization: Bearer <key>'")
    team = team_by_key_hash(session, hash_key(key))
    if team is None:
        raise Unauthorized("invalid or revoked API key")
    return team


def team_by_key_hash(session: Session, key_hash: str) -> Team | None:
    """The team whose live (unrevoked) API key has this hash."""
    return session.scalar(
        select(Team).join(ApiKey, ApiKey.team_id == Team.id)
        .where(ApiKey.key_hash == key_hash, ApiKey.revoked_at.is_(None))
    )


def team_by_name(session: Session, name: str) -> Team | None:
    return session.scalar(select(Team).where(Team.name == name))


def start_web_session(session: Session, team: Team, key: str) -> WebSession:
    """A dashboard session for a team signed in with this (live) key."""
    row = WebSession(team_id=team.id, key_hash=hash_key(key))
    session.add(row)
    session.flush()
    return row


def web_session_team(session: Session, session_id: uuid.UUID) -> Team | None:
    """The team of a dashboard session that has not ended and whose API key is still live."""
    return session.scalar(
        select(Team).join(WebSession, WebSession.team_id == Team.id)
        .join(ApiKey, (ApiKey.key_hash == WebSession.key_hash) & (ApiKey.team_id == Team.id))
        .where(WebSession.id == session_id, WebSession.ended_at.is_(None), ApiKey.revoked_at.is_(None))
    )


def end_web_session(session: Session, session_id: uuid.UUID) -> None:
    """Sign a dashboard session out for good: its cookie names an ended row from now on."""
    session.execute(update(WebSession).where(WebSession.id == session_id, WebSession.ended_at.is_(None))
                    .values(ended_at=utcnow()))
