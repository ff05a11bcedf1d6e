"""docker-compose.yml cannot run here (no Docker engine): read it and check it against the code."""

from pathlib import Path

import pytest
import yaml

from tokenmill.cli import _parser
from tokenmill.settings import Settings

COMPOSE = yaml.safe_load((Path(__file__).resolve().parents[2] / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]


def test_the_production_stack_has_every_service_with_healthchecks():
    assert {"postgres", "redis", "minio", "minio-bucket", "migrate", "api", "worker", "beat"} <= set(SERVICES)
    for name in ("postgres", "redis", "minio", "api", "worker"):
        assert "healthcheck" in SERVICES[name], name


@pytest.mark.parametrize("name", ["migrate", "api", "worker", "beat"])
def test_tokenmill_services_run_real_commands_with_known_settings(name):
    service = SERVICES[name]
    command = service["command"]
    assert command[0] == "tokenmill"
    _parser().parse_args(command[1:])  # exits on an unknown command or option
    fields = {f"TOKENMILL_{field.upper()}" for field in Settings.model_fields}
    variables = {key for key in service["environment"] if key.startswith("TOKENMILL_")}
    assert variables <= fields and {"TOKENMILL_DATABASE_URL", "TOKENMILL_BROKER_URL", "TOKENMILL_STORAGE_URL"} <= variables
    assert service["environment"]["TOKENMILL_DATABASE_URL"].startswith("postgresql+psycopg://")
    assert service["build"] == "." and service["image"] == "tokenmill:latest"


def test_application_services_wait_for_the_schema_and_the_bucket():
    for name in ("api", "worker", "beat"):
        needs = SERVICES[name]["depends_on"]
        assert needs["migrate"]["condition"] == "service_completed_successfully"
        assert needs["minio-bucket"]["condition"] == "service_completed_successfully"


def test_the_upkeep_has_a_process_of_its_own_and_no_worker_runs_it():
    # Sweeps on a worker's slots waited behind training: with every slot busy, none ran.
    assert SERVICES["beat"]["command"] == ["tokenmill", "beat"]
    assert "--beat" not in SERVICES["worker"]["command"] and "-B" not in SERVICES["worker"]["command"]
