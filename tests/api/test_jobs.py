"""POST/GET /v1/jobs: validation before queueing, idempotency, cancel, isolation (no worker here)."""

import io

import pytest

PROBLEM = "application/problem+json"


@pytest.fixture
def corpus_id(api):
    response = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "eng_Latn"},
                        files={"file": ("c.txt", io.BytesIO(b"some text here\nand more text\n"))})
    return response.json()["id"]


def job(api, corpus_id, spec=None, headers=None, **body):
    payload = {"tokenizer": "tok", "spec": spec or {"vocab_size": 1000}, "train_corpora": [corpus_id], **body}
    return api.post("/v1/jobs", json=payload, headers=headers or {})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"algorithm": "wordpiece", "library": "sentencepiece"}, "spec.library"),
        ({"byte_level": True, "byte_fallback": True}, "spec.byte_fallback"),
        ({"vocab_size": 200}, "spec.vocab_size"),
        ({"vocab_size": 256}, "spec.vocab_size"),
        ({"pre_tokenizer": "gpt5"}, "spec.pre_tokenizer"),
        ({"pre_tokenizer": "none", "pre_tokenizer_regex": "(unclosed"}, "spec.pre_tokenizer_regex"),
        ({"algorithm": "bert"}, "spec.algorithm"),
        ({"vocab_size": "big"}, "spec.vocab_size"),
        ({"colour": "blue"}, "spec.colour"),
        ({"special_tokens": ["<s>", "<s>"]}, "spec.special_tokens"),
        ({"library": "sentencepiece", "normalization": "nfd"}, "spec.normalization"),
    ],
)
def test_bad_spec_is_refused_before_queueing_naming_the_field(api, corpus_id, spec, field):
    before = api.get("/v1/jobs").json()["total"]
    response = job(api, corpus_id, spec)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["field"] == field
    assert api.get("/v1/jobs").json()["total"] == before


def test_bad_body_fields_are_named(api, corpus_id):
    assert job(api, "not-a-uuid").json()["field"] == "train_corpora"
    assert job(api, "00000000-0000-0000-0000-000000000000").json()["field"] == "train_corpora"
    assert job(api, corpus_id, tokenizer="has space").json()["field"] == "tokenizer"
    assert job(api, corpus_id, eval_corpora=["00000000-0000-0000-0000-000000000000"]).json()["field"] == "eval_corpora"
    missing = api.post("/v1/jobs", json={"tokenizer": "x"})
    assert missing.status_code == 422 and missing.json()["field"] == "train_corpora"


def test_job_is_queued_with_defaults_filled_in(api, corpus_id):
    response = job(api, corpus_id)
    assert response.status_code == 202
    body = response.json()
    assert (body["status"], body["stage"], body["progress"], body["version"], body["error"]) == ("queued", "queued", 0.0, None, None)
    assert body["spec"]["byte_level"] is True and body["spec"]["pre_tokenizer"] == "gpt2"
    assert body["eval_corpora"] == [corpus_id]
    assert api.get(f"/v1/jobs/{body['id']}").json()["id"] == body["id"]


def test_idempotency_key_returns_the_same_job(api, corpus_id):
    first = job(api, corpus_id, headers={"Idempotency-Key": "abc"})
    again = job(api, corpus_id, headers={"Idempotency-Key": "abc"})
    other = job(api, corpus_id, headers={"Idempotency-Key": "abd"})
    assert (first.status_code, again.status_code) == (202, 200)
    assert first.json()["id"] == again.json()["id"] != other.json()["id"]


def test_cancel_queued_job_then_cancel_is_idempotent(api, corpus_id):
    job_id = job(api, corpus_id).json()["id"]
    cancelled = api.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert api.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "cancelled"


def test_another_teams_job_is_404(app_client, api, corpus_id, sessionmaker):
    from tokenmill.db import transaction
    from tokenmill.teams import create_team

    job_id = job(api, corpus_id).json()["id"]
    with transaction(sessionmaker) as session:
        _, key = create_team(session, f"intruder-{job_id[:8]}")
    other = {"Authorization": f"Bearer {key}"}
    assert app_client.get(f"/v1/jobs/{job_id}", headers=other).status_code == 404
    assert app_client.post(f"/v1/jobs/{job_id}/cancel", headers=other).status_code == 404
    # Training on another team's corpus is refused as an unknown corpus.
    assert job(app_client, corpus_id, headers=other).json()["field"] == "train_corpora"
    assert app_client.get("/v1/tokenizers/tok/versions/latest", headers=other).status_code == 404


def test_malformed_json_names_the_body(api):
    response = api.post("/v1/jobs", content=b'{"tokenizer": "x", bad', headers={"content-type": "application/json"})
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
    assert response.json()["field"] == "body" and "not valid JSON" in response.json()["detail"]


def test_a_reused_idempotency_key_with_another_request_is_refused_naming_the_header(api, corpus_id):
    first = job(api, corpus_id, headers={"Idempotency-Key": "reused"})
    replay = job(api, corpus_id, headers={"Idempotency-Key": "reused"})
    other = job(api, corpus_id, spec={"vocab_size": 2000}, headers={"Idempotency-Key": "reused"})
    renamed = job(api, corpus_id, tokenizer="other", headers={"Idempotency-Key": "reused"})
    assert (first.status_code, replay.status_code) == (202, 200) and first.json()["id"] == replay.json()["id"]
    for response in (other, renamed):
        assert response.status_code == 422 and response.headers["content-type"] == PROBLEM
        assert response.json()["field"] == "Idempotency-Key"
    assert api.get("/v1/jobs").json()["total"] == 1


@pytest.mark.parametrize(("base", "vocab_size", "detail"), [
    ({"reference": "gpt2"}, 50257, "not above the base's 50257"),
    ({"tokenizer": "nothing-here", "version": 1}, 60000, "nothing-here"),
])
def test_a_base_that_cannot_be_extended_is_refused_naming_spec_base(api, corpus_id, base, vocab_size, detail):
    response = job(api, corpus_id, {"vocab_size": vocab_size, "base": base})
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "spec.base" and detail in response.json()["detail"]


def test_an_extension_pins_its_base(api, corpus_id):
    response = job(api, corpus_id, {"vocab_size": 50300, "base": {"reference": "gpt2"}})
    assert response.status_code == 202, response.text
    spec = response.json()["spec"]
    assert spec["base"] == {"tokenizer": None, "version": None, "reference": "gpt2", "vocab_size": 50257}
    assert (spec["library"], spec["pre_tokenizer"], spec["byte_level"]) == ("tokenmill", "gpt2", True)
