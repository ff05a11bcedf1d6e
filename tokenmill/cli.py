"""The `tokenmill` command: operations (migrate, serve, worker, beat, teams, up) and a REST client."""

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tokenmill import client
from tokenmill.db import migrate
from tokenmill.settings import get_settings

if TYPE_CHECKING:
    import uuid

    from sqlalchemy.orm import Session


def serve(host: str, port: int) -> None:
    """Become the API process (uvicorn on service.app): the core never imports the service."""
    os.execv(sys.executable, [sys.executable, "-m", "uvicorn", "service.app:create_app", "--factory",
                              "--host", host, "--port", str(port), "--log-level", "info",
                              "--no-access-log"])  # the API writes its own access lines (JSON, with request ids)


def worker(concurrency: int) -> None:
    """Become a Celery worker process (prefork) of workers.app: the core never imports the workers."""
    os.execv(sys.executable, [sys.executable, "-m", "celery", "-A", "workers.app", "worker", "--loglevel=INFO",
                              f"--concurrency={concurrency}", "--pool=prefork", "--without-gossip", "--without-mingle"])


def beat() -> None:
    """Become the upkeep process (workers.upkeep): it sweeps and reconciles itself, on no worker's slot."""
    os.execv(sys.executable, [sys.executable, "-m", "workers.upkeep"])


def manage_teams(args: argparse.Namespace) -> None:
    """teams create NAME | teams key NAME | teams quota NAME [--QUOTA N|default …] | teams revoke KEY."""
    from tokenmill.db import make_engine, make_sessionmaker, transaction
    from tokenmill.errors import TokenmillError
    from tokenmill.teams import create_team, issue_key, revoke_key, team_by_name

    engine = make_engine(get_settings().database_url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            if args.teams_command == "create":
                team, key = create_team(session, args.name)
                print(f"created team {team.name} ({team.id}); its API key, shown once:")
                print(key)
            elif args.teams_command == "key":
                named = team_by_name(session, args.name)
                if named is None:
                    sys.exit(f"no team named {args.name!r}")
                key = issue_key(session, named)
                print(f"a new API key for team {named.name}, shown once:")
                print(key)
            elif args.teams_command == "quota":
                named = team_by_name(session, args.name)
                if named is None:
                    sys.exit(f"no team named {args.name!r}")
                _set_quotas(session, named.id, args)
            else:
                revoke_key(session, args.key)
                print("revoked: requests with this key now answer 401")
    except TokenmillError as exc:
        sys.exit(exc.detail)
    finally:
        engine.dispose()


def _set_quotas(session: "Session", team_id: "uuid.UUID", args: argparse.Namespace) -> None:
    """Set the quotas given (a number, or `default` to go back to the settings' figure), then print them all."""
    from tokenmill.quotas import QUOTA_NAMES, quotas_of, set_quotas, usage_of

    figures = {name: getattr(args, name) for name in QUOTA_NAMES if getattr(args, name) is not None}
    try:
        set_quotas(session, team_id, {name: None if value == "default" else int(value) for name, value in figures.items()})
    except ValueError as exc:
        sys.exit(f"teams quota: {exc}")
    quotas, usage = quotas_of(session, team_id, get_settings()).as_dict(), usage_of(session, team_id).as_dict()
    for name in QUOTA_NAMES:
        print(f"{name:<20} {quotas[name]:>16}  (in use: {usage.get(name, '-')})")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tokenmill", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="apply database migrations")
    p = sub.add_parser("serve", help="run the API")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p = sub.add_parser("worker", help="run a Celery worker")
    p.add_argument("--concurrency", type=int, default=1)
    sub.add_parser("beat", help="run the upkeep: the sweeper and the reconciliation (one per installation)")
    p = sub.add_parser("up", help="embedded mode: SQLite, a local folder and a local transport; API, worker, upkeep")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--home", type=Path, help="where the data lives (default: TOKENMILL_HOME, or ./.tokenmill)")
    teams = sub.add_parser("teams", help="manage teams").add_subparsers(dest="teams_command", required=True)
    teams.add_parser("create", help="create a team and print its API key").add_argument("name")
    teams.add_parser("key", help="issue another API key for a team").add_argument("name")
    teams.add_parser("revoke", help="revoke an API key").add_argument("key")
    p = teams.add_parser("quota", help="show a team's quotas, or set some (a number, or 'default')")
    p.add_argument("name")
    for name in ("storage-bytes", "corpora", "queued-jobs", "running-jobs", "concurrent-uploads",
                 "requests-per-minute"):
        p.add_argument(f"--{name}", dest=name.replace("-", "_"), metavar="N|default")
    client.add_commands(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if args.command == "migrate":
        migrate()
    elif args.command == "serve":
        serve(args.host, args.port)
    elif args.command == "worker":
        worker(args.concurrency)
    elif args.command == "beat":
        beat()
    elif args.command == "up":
        from tokenmill.embedded import up

        up(args.home or get_settings().home, args.host, args.port)
    elif args.command == "teams":
        manage_teams(args)
    else:
        sys.exit(client.run(args))
