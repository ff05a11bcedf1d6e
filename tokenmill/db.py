"""Engine and session factory. Callers own transactions: core functions flush, never commit."""

import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, DateTime, Dialect, Engine, MetaData, Result, TypeDecorator, create_engine, event
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# The database did not answer: its server is down, restarting or unreachable.
DATABASE_AWAY: tuple[type[Exception], ...] = (OperationalError, InterfaceError)
# Every connection of a process's pool stayed in use while it waited: load, not an outage.
POOL_BUSY: tuple[type[Exception], ...] = (PoolTimeout,)


def utcnow() -> datetime:
    return datetime.now(UTC)


def unstorable(text: str, controls: bool = False) -> str | None:
    """Why text can be neither stored (PostgreSQL text holds no NUL) nor trained on or encoded
    (a lone surrogate is not text), as "holds …" naming the code point, never echoing the text;
    with `controls`, any control character too (special tokens); None when it is fine. The
    common cases run in C: a search for NUL and an encode."""
    if "\x00" in text:
        return "holds a NUL character (U+0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds a lone surrogate (U+{ord(text[exc.start]):04X}), which is not text"
    if controls and not text.isprintable():
        for char in text:
            if unicodedata.category(char) == "Cc":
                return f"holds a control character (U+{ord(char):04X})"
    return None


def rowcount(result: Result[Any]) -> int:
    """The rows an UPDATE or DELETE matched."""
    # Session.execute is typed as returning a Result; for these statements it is a CursorResult.
    return cast(CursorResult[Any], result).rowcount


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on every database (SQLite stores them naive, in UTC)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and dialect.name == "sqlite":
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def migrate(database_url: str | None = None) -> None:
    """Bring the database schema to the newest Alembic revision (Alembic is the schema)."""
    from alembic import command
    from alembic.config import Config

    from tokenmill.settings import get_settings

    config = Config(str(MIGRATIONS.parent / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = database_url or get_settings().database_url
    command.upgrade(config, "head")


def make_engine(url: str, pool_size: int = 5, max_overflow: int = 5, pool_timeout: float = 10) -> Engine:
    """An engine for PostgreSQL (psycopg 3) or SQLite; SQLite gets foreign keys and WAL.
    `pool_size` connections are kept, `max_overflow` more opened under load."""
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # A server that drops packets must fail a request in seconds, not after the OS's TCP timeout.
    return create_engine(url, pool_pre_ping=True, pool_size=pool_size, max_overflow=max_overflow,
                         pool_timeout=pool_timeout,
                         connect_args={"connect_timeout": 5})


def _sqlite_pragmas(dbapi_connection: DBAPIConnection, _record: ConnectionPoolEntry) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def release(session: Session) -> None:
    """End the session's transaction, committing what it did, so that its connection goes back to
    the pool before slow work that needs no database (reading the store, an encode in the sandbox);
    the session takes a connection again if it is used after. The one way to let go of a
    connection mid-request: a request's owner (a route) calls it, and a core function with slow
    work between its reads and what follows takes it from its caller as `release`."""
    session.commit()


@contextmanager
def transaction(factory: sessionmaker[Session]) -> Iterator[Session]:
    """A session that commits when the block ends cleanly and rolls back otherwise."""
    with factory() as session, session.begin():
        yield session
