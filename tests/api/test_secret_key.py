"""The API will not sign dashboard cookies with a secret anyone knows, except embedded on SQLite."""

import logging

import pytest
import yaml
from pydantic import SecretStr

from service.app import InsecureSecretKey, create_app
from tests.services import REPO
from tokenmill.settings import DEVELOPMENT_SECRET


@pytest.mark.parametrize("secret", [DEVELOPMENT_SECRET, "change-me", ""])
def test_a_public_secret_is_refused_on_postgresql(settings, secret):
    with pytest.raises(InsecureSecretKey, match="TOKENMILL_SECRET_KEY"):
        create_app(settings.model_copy(update={"secret_key": SecretStr(secret)}))


def test_the_embedded_mode_warns_and_starts(settings, tmp_path, caplog):
    embedded = settings.model_copy(update={"secret_key": SecretStr(DEVELOPMENT_SECRET),
                                           "database_url": f"sqlite:///{tmp_path / 'tokenmill.db'}"})
    with caplog.at_level(logging.WARNING, logger="service.app"):
        assert create_app(embedded) is not None
    assert "TOKENMILL_SECRET_KEY" in caplog.text


def test_compose_requires_the_secret_key():
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    environments = [service["environment"] for service in compose["services"].values()
                    if "TOKENMILL_SECRET_KEY" in service.get("environment", {})]
    assert environments and {"api"} <= {name for name, service in compose["services"].items()
                                        if "TOKENMILL_SECRET_KEY" in service.get("environment", {})}
    for environment in environments:
        assert environment["TOKENMILL_SECRET_KEY"].startswith("${TOKENMILL_SECRET_KEY:?"), environment
