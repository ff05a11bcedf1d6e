"""`tokenmill teams create | key | revoke` against PostgreSQL, and what the API then accepts."""

import os
import subprocess
import sys
import uuid


def tokenmill(database_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TOKENMILL_DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "-m", "tokenmill", "teams", *args], env=env, capture_output=True, text=True)


def test_create_prints_the_key_alone_on_the_last_line_then_keys_can_be_added_and_revoked(database_url, app_client):
    name = f"cli-{uuid.uuid4().hex[:8]}"
    created = tokenmill(database_url, "create", name)
    assert created.returncode == 0, created.stderr
    first = created.stdout.strip().splitlines()[-1]
    assert first.startswith("tm_") and " " not in first
    assert tokenmill(database_url, "create", name).returncode != 0  # names are unique

    second = tokenmill(database_url, "key", name).stdout.strip().splitlines()[-1]
    for key in (first, second):
        assert app_client.get("/v1/corpora", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert tokenmill(database_url, "revoke", first).returncode == 0
    assert app_client.get("/v1/corpora", headers={"Authorization": f"Bearer {first}"}).status_code == 401
    assert app_client.get("/v1/corpora", headers={"Authorization": f"Bearer {second}"}).status_code == 200
    assert tokenmill(database_url, "revoke", "tm_unknown").returncode != 0
