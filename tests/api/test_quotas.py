"""Quotas per team (tokenmill.quotas): shown by GET /v1/team, set by the operator CLI, enforced with problem+json."""

import io
import uuid

import pytest

from tests.conftest import make_team
from tokenmill.cli import main as cli
from tokenmill.db import transaction
from tokenmill.quotas import QUOTA_NAMES, Quotas, set_quotas
from tokenmill.settings import Settings

PROBLEM = "application/problem+json"


def upload(api, text=b"some text here\nand more text\n"):
    response = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "eng_Latn"},
                        files={"file": ("c.txt", io.BytesIO(text))})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_team_sees_its_quotas_and_use(api, settings):
    upload(api)
    body = api.get("/v1/team").json()
    assert body["quotas"] == Quotas.defaults(settings).as_dict()
    assert body["usage"]["corpora"] == 1
    assert body["usage"]["storage_bytes"] == len(b"some text here\nand more text\n")
    assert body["usage"]["queued_jobs"] == 0


def test_queued_jobs_past_the_quota_are_refused_naming_it(api, sessionmaker, team_key):
    team, _ = team_key
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, {"queued_jobs": 1})
    corpus = upload(api)
    first = api.post("/v1/jobs", json={"tokenizer": "t", "spec": {"vocab_size": 300}, "train_corpora": [corpus]})
    assert first.status_code == 202, first.text
    second = api.post("/v1/jobs", json={"tokenizer": "t", "spec": {"vocab_size": 300}, "train_corpora": [corpus]})
    assert second.status_code == 409
    assert second.headers["content-type"] == PROBLEM
    body = second.json()
    assert (body["quota"], body["limit"], body["used"]) == ("queued_jobs", 1, 1)
    assert "queued_jobs" in body["detail"]
    assert second.headers["retry-after"]
    # A replay of the first submission's key is not a new job: it is still answered.
    assert api.get("/v1/jobs").json()["total"] == 1


def test_an_empty_bucket_answers_429_with_rate_limit_headers(api, sessionmaker, team_key, settings):
    team, _ = team_key
    with transaction(sessionmaker) as session:
        set_quotas(session, team.id, {"requests_per_minute": 1})
    answers = [api.post("/v1/references/gpt2/encode", json={"text": "hello"}) for _ in range(settings.rate_burst + 1)]
    assert [a.status_code for a in answers[:-1]] == [200] * settings.rate_burst
    refused = answers[-1]
    assert refused.status_code == 429
    assert refused.headers["content-type"] == PROBLEM
    assert refused.json()["quota"] == "requests_per_minute"
    assert int(refused.headers["retry-after"]) >= 1
    assert "remaining=0" in refused.headers["ratelimit"]
    # Cheap reads are not counted.
    assert api.get("/v1/corpora").status_code == 200


def test_another_team_keeps_its_own_bucket(app_client, sessionmaker, settings):
    (greedy, greedy_key), (_, other_key) = make_team(sessionmaker), make_team(sessionmaker)
    with transaction(sessionmaker) as session:
        set_quotas(session, greedy.id, {"requests_per_minute": 1})
    greedy_headers, other_headers = {"Authorization": f"Bearer {greedy_key}"}, {"Authorization": f"Bearer {other_key}"}
    for _ in range(settings.rate_burst + 1):
        app_client.post("/v1/references/gpt2/encode", json={"text": "x"}, headers=greedy_headers)
    assert app_client.post("/v1/references/gpt2/encode", json={"text": "x"}, headers=greedy_headers).status_code == 429
    assert app_client.post("/v1/references/gpt2/encode", json={"text": "x"}, headers=other_headers).status_code == 200


def test_the_operator_sets_and_resets_quotas_from_the_cli(sessionmaker, settings, monkeypatch, capsys):
    team, _ = make_team(sessionmaker)
    monkeypatch.setenv("TOKENMILL_DATABASE_URL", settings.database_url)
    from tokenmill.settings import get_settings

    get_settings.cache_clear()
    try:
        cli(["teams", "quota", team.name, "--storage-bytes", "1000", "--running-jobs", "1"])
        shown = capsys.readouterr().out
        assert "storage_bytes" in shown and " 1000" in shown
        with sessionmaker() as session:
            from tokenmill.quotas import quotas_of

            quotas = quotas_of(session, team.id, Settings())
            assert (quotas.storage_bytes, quotas.running_jobs) == (1000, 1)
        cli(["teams", "quota", team.name, "--storage-bytes", "default"])
        with sessionmaker() as session:
            assert quotas_of(session, team.id, Settings()).storage_bytes == Settings().quota_storage_bytes
        with pytest.raises(SystemExit):
            cli(["teams", "quota", f"nobody-{uuid.uuid4().hex[:6]}"])
    finally:
        get_settings.cache_clear()


def test_every_quota_has_a_setting():
    assert all(hasattr(Settings(), f"quota_{name}") for name in QUOTA_NAMES)
