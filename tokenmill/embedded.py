"""`tokenmill up`: the whole product on one machine with nothing but Python.

SQLite file, a local folder store and kombu's filesystem transport, under one home folder;
an API process, a real worker process and the upkeep process (sweeper and reconciliation)
beside it. The first start creates a
local team, keeps its API key in `<home>/api-key` (mode 0600) and loads a small demo corpus.
"""

import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.corpora.statistics_runs import record_statistics
from tokenmill.db import make_engine, make_sessionmaker, migrate, transaction
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.settings import get_settings
from tokenmill.store import open_store, read_into
from tokenmill.teams import create_team, team_by_name

LOCAL_TEAM = "local"
DEMO = Path(__file__).resolve().parent / "demo"
DEMO_CORPORA = [
    ("bible-eng_Latn.txt", CorpusFields(name="demo-bible-en", domain="religion", language="eng_Latn",
                                        parallel_group="demo-bible")),
    ("bible-spa_Latn.txt", CorpusFields(name="demo-bible-es", domain="religion", language="spa_Latn",
                                        parallel_group="demo-bible")),
]


def embedded_environment(home: Path) -> dict[str, str]:
    home = home.resolve()
    return {
        "TOKENMILL_HOME": str(home),
        "TOKENMILL_DATABASE_URL": f"sqlite:///{home / 'tokenmill.db'}",
        "TOKENMILL_BROKER_URL": f"filesystem://{home / 'broker'}",
        "TOKENMILL_STORAGE_URL": f"file://{home / 'store'}",
        "TOKENMILL_SECRET_KEY": os.environ.get("TOKENMILL_SECRET_KEY") or _local_secret(home),
    }


def _local_secret(home: Path) -> str:
    # Signs dashboard cookies: random per installation, kept beside the database.
    path = home / "secret-key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def first_start(home: Path) -> str:
    """Create the local team and demo corpora if missing; return the team's API key."""
    settings = get_settings()
    factory = make_sessionmaker(make_engine(settings.database_url))
    store = open_store(settings.storage_url)
    key_file = home / "api-key"
    demo = []
    with transaction(factory) as session:
        team = team_by_name(session, LOCAL_TEAM)
        if team is None:
            team, key = create_team(session, LOCAL_TEAM)
            key_file.write_text(key + "\n")
            key_file.chmod(0o600)
            demo = DEMO_CORPORA
    # The team is committed first: ingest inserts each corpus row in a transaction of its own.
    corpora = []
    for filename, fields in demo:
        with (DEMO / filename).open("rb") as handle:
            corpora.append(ingest_corpus(factory, store, team, fields, read_into(handle),
                                         max_bytes=settings.max_upload_bytes, max_line_bytes=settings.max_line_bytes))
    for corpus in corpora:  # small: computed here rather than queued
        record_statistics(factory, store, corpus.id, WorkLimits.of(settings))
    return key_file.read_text().strip()


def up(home: Path, host: str, port: int) -> None:
    """Migrate, seed, then run a worker, the upkeep and an API process until interrupted."""
    home.mkdir(parents=True, exist_ok=True)
    os.environ.update(embedded_environment(home))
    os.environ["TOKENMILL_API_URL"] = f"http://{host}:{port}"
    get_settings.cache_clear()
    migrate()
    key = first_start(home)
    tokenmill = [sys.executable, "-m", "tokenmill"]
    worker = subprocess.Popen([*tokenmill, "worker"], env=dict(os.environ))
    upkeep = subprocess.Popen([*tokenmill, "beat"], env=dict(os.environ))
    print(f"\nTokenmill is starting on http://{host}:{port}  (data in {home.resolve()})")
    print(f"API key of team '{LOCAL_TEAM}' (also in {home / 'api-key'}):\n{key}\n", flush=True)
    api = subprocess.Popen([*tokenmill, "serve", "--host", host, "--port", str(port)], env=dict(os.environ))
    for stop in (signal.SIGTERM, signal.SIGHUP):  # a kill or a closed terminal stops both, as Ctrl-C does
        signal.signal(stop, _stopped)
    try:
        api.wait()
    except (KeyboardInterrupt, _Stopped):
        pass
    finally:
        for process in (api, worker, upkeep):
            process.terminate()
        for process in (api, worker, upkeep):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


class _Stopped(Exception):
    """`tokenmill up` was asked to stop by a signal."""


def _stopped(signum: int, frame: object) -> None:
    raise _Stopped(signal.Signals(signum).name)

