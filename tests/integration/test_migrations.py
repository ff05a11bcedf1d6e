"""Alembic is the schema: it upgrades and downgrades on PostgreSQL and SQLite and matches the models."""

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect

from tokenmill.db import MIGRATIONS


def alembic_config(url: str) -> Config:
    config = Config(str(MIGRATIONS.parent / "alembic.ini"))
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["database_url"] = url
    return config


def tables(url: str) -> set[str]:
    engine = create_engine(url)
    names = set(inspect(engine).get_table_names()) - {"alembic_version"}
    engine.dispose()
    return names


def test_sqlite_round_trip_and_models_match(tmp_path):
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    config = alembic_config(url)
    command.upgrade(config, "head")
    assert {"teams", "api_keys", "corpora", "training_jobs", "tokenizer_versions", "evaluations"} <= tables(url)
    command.check(config)  # raises if the models and the migrations disagree
    command.downgrade(config, "base")
    assert tables(url) == set()


def test_postgres_schema_matches_models(database_url):
    # The session database was built by `alembic upgrade head`; the models must agree with it.
    command.check(alembic_config(database_url))
