"""NUL characters, lone surrogates and numbers out of range, wherever a request carries them: a 422 naming the field."""

import io
import json

import pytest

from tests.api.dashboard import sign_in

PROBLEM = "application/problem+json"


def post_json(client, path: str, body: dict):
    """POST `body` as JSON with \\u escapes: a lone surrogate arrives as a client would send it."""
    return client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})


def assert_refused(response, field: str | None) -> None:
    assert response.status_code == 422, response.text[:500]
    assert response.headers["content-type"] == PROBLEM
    assert response.json().get("field") == field, response.json()


@pytest.mark.parametrize(("path", "field"), [
    ("/v1/tokenizers/a%00b/versions", "name"),
    ("/v1/tokenizers/a%00b/versions/1", "name"),
    ("/v1/jobs?status=queued%00", "status"),
    ("/v1/corpora?domain=news%00", "domain"),
    ("/v1/corpora?page=99999999999999999999", "page"),
    ("/v1/jobs?page=9223372036854775807", "page"),
])
def test_bad_path_and_query_values(api, path, field):
    assert_refused(api.get(path), field)


def test_a_version_number_out_of_range_is_refused(api):
    # Past the checks that know the field, the database's DataError is still a 422.
    response = api.get("/v1/tokenizers/tok/versions/99999999999999999999")
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM, response.text[:300]


@pytest.mark.parametrize(("fields", "field"), [
    ({"name": "bad\x00name"}, "name"),
    ({"domain": "news\x00"}, "domain"),
    ({"parallel_group": "g\x00"}, "parallel_group"),
    ({"format": "jsonl", "text_field": "t\x00"}, "text_field"),
    ({"parallel_group": "g" * 101}, "parallel_group"),
])
def test_bad_form_fields_of_an_upload(api, fields, field):
    form = {"name": "c", "domain": "news", "language": "en", **fields}
    response = api.post("/v1/corpora", data=form, files={"file": ("c.txt", io.BytesIO(b'{"t": "words"}\n'))})
    assert_refused(response, field)
    assert api.get("/v1/corpora").json()["total"] == 0


@pytest.mark.parametrize(("body", "field"), [
    ({"tokenizer": "tok\x00", "version": 1}, "tokenizer"),
    ({"tokenizer": "\ud800", "version": 1}, "tokenizer"),
    ({"tokenizer": "tok", "version": 10**30}, "version"),
    ({"tokenizer": "tok", "version": 2**40}, "version"),
    ({"reference": "gpt2", "corpora": ["\udc80"]}, "corpora"),
    ({"reference": "gpt2", "whole": "yes"}, "whole"),
])
def test_bad_json_values_of_an_evaluation(api, body, field):
    assert_refused(post_json(api, "/v1/evaluations", body), field)


def test_bad_json_values_of_a_job_and_an_encode(api):
    body = {"tokenizer": "tok", "train_corpora": ["00000000-0000-0000-0000-000000000000"],
            "eval_corpora": ["\x00"]}
    assert_refused(post_json(api, "/v1/jobs", body), "eval_corpora")
    assert_refused(post_json(api, "/v1/references/gpt2/encode", {"text": "half a pair \ud83d"}), "text")
    nan = api.post("/v1/jobs", content=b'{"tokenizer": "t", "train_corpora": [], "spec": {"seed": NaN}}',
                   headers={"content-type": "application/json"})
    assert_refused(nan, "spec.seed")


def test_bad_dashboard_form_fields_and_pages(app_client, team_key):
    from fastapi.testclient import TestClient

    client = TestClient(app_client.app, raise_server_exceptions=False)  # its own cookie jar
    token = sign_in(client, team_key[1])
    form = {"csrf_token": token, "name": "n\x00", "domain": "web", "language": "en"}
    response = client.post("/corpora", data=form, files={"file": ("c.txt", io.BytesIO(b"text\n"))},
                           headers={"Accept": "application/json"})
    assert_refused(response, "name")
    assert client.get("/corpora?page=99999999999999999999").status_code == 400  # a page out of range
