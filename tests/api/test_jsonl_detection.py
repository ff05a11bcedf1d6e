"""A file uploaded without `format`: jsonl by its name, text otherwise, but refused naming `format` when its first
line is a JSON object; an explicit format always wins. The API, its spooled form, the dashboard and the CLI alike."""

import contextlib
import gzip
import io
import json
import re

import pytest
import zstandard
from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.api.test_corpora import PROBLEM, stored_keys
from tests.api.test_streamed_upload import FIELDS, body, form, post
from tokenmill import client
from tokenmill.cli import main

ROWS = b'{"text": "hello world"}\n\n{"text": "tres palabras aqu\xc3\xad", "id": 2}\n'


def upload(api, data: bytes, filename: str, **fields):
    return api.post("/v1/corpora", data={**FIELDS, **fields}, files={"file": (filename, io.BytesIO(data))})


@pytest.mark.parametrize(("filename", "data"), [
    ("c.jsonl", ROWS),
    ("C.JSONL", ROWS),
    ("c.ndjson", ROWS),
    ("c.jsonl.gz", gzip.compress(ROWS, mtime=0)),
    ("c.jsonl.zst", zstandard.ZstdCompressor().compress(ROWS)),
])
def test_a_json_lines_name_without_format_is_jsonl(api, filename, data):
    response = upload(api, data, filename)
    assert response.status_code == 201, response.text
    corpus = response.json()
    assert (corpus["format"], corpus["lines"], corpus["words"]) == ("jsonl", 2, 5)


def test_a_json_lines_name_takes_a_text_field(api):
    data = b'{"body": "one two"}\n{"body": "three"}\n'
    corpus = upload(api, data, "c.jsonl", text_field="body").json()
    assert (corpus["format"], corpus["text_field"], corpus["words"]) == ("jsonl", "body", 3)


@pytest.mark.parametrize("data", [
    ROWS,
    b"\n  \r\n\xe3\x80\x80\n" + ROWS,  # blank lines (one of U+3000) before it
    gzip.compress(ROWS, mtime=0),
    b"\n" * 1_500_000 + ROWS,  # past the first piece of the stream
])
def test_json_lines_without_format_or_name_are_refused_naming_format(api, store, data):
    before, keys = api.get("/v1/corpora").json()["total"], stored_keys(store)
    response = upload(api, data, "c.txt")
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["field"] == "format"
    assert "format=jsonl" in problem["detail"] and "text_field=" in problem["detail"]
    assert "format=text" in problem["detail"]
    assert api.get("/v1/corpora").json()["total"] == before
    assert stored_keys(store) == keys  # no object, no row


@pytest.mark.parametrize("before", [0, 3])
def test_the_refusal_holds_whether_the_file_streams_or_is_spooled(api, store, before):
    keys = stored_keys(store)
    fields = form(FIELDS)
    response = post(api, body([*fields[:before], ("file", ROWS, "rows"), *fields[before:]]))
    assert response.status_code == 422 and response.json()["field"] == "format", response.text
    named = post(api, body([*fields[:before], ("file", ROWS, "rows.jsonl"), *fields[before:]]))
    assert named.status_code == 201 and named.json()["format"] == "jsonl", named.text
    assert len(stored_keys(store) - keys) == 1


@pytest.mark.parametrize("data", [
    b"plain text, one document per line\n{ but this is not JSON }\n",
    b"{not json at all\n" + ROWS,
    b'["a", "JSON array"]\n' + ROWS,
    b'"a JSON string"\n',
])
def test_text_whose_first_line_is_no_json_object_stays_text(api, data):
    response = upload(api, data, "c.txt")
    assert response.status_code == 201, response.text
    assert response.json()["format"] == "text"


def test_an_explicit_format_always_wins(api):
    as_text = upload(api, ROWS, "c.txt", format="text").json()
    assert (as_text["format"], as_text["lines"]) == ("text", 2)
    named = upload(api, ROWS, "c.jsonl", format="text").json()
    assert (named["format"], named["lines"]) == ("text", 2)
    as_jsonl = upload(api, ROWS, "c.txt", format="jsonl").json()
    assert (as_jsonl["format"], as_jsonl["words"]) == ("jsonl", 5)


def test_a_text_field_without_format_asks_for_it(api):
    response = upload(api, b"just text\n", "c.txt", text_field="body")
    assert response.status_code == 422 and response.json()["field"] == "text_field"
    assert "format=jsonl" in response.json()["detail"]


def test_the_dashboard_form_detects_and_refuses_the_same_way(app_client, api, store):
    browser = TestClient(app_client.app, follow_redirects=False)
    token = sign_in(browser, api.headers["Authorization"].removeprefix("Bearer "))
    page = browser.get("/corpora").text
    assert re.search(r'<option value="" selected>detect</option>', page)
    fields = {"csrf_token": token, **FIELDS, "format": ""}

    detected = browser.post("/corpora", data=fields, files={"file": ("rows.jsonl", io.BytesIO(ROWS))})
    assert detected.status_code == 303, detected.text[:500]
    corpus = api.get(detected.headers["location"].replace("/corpora/", "/v1/corpora/")).json()
    assert (corpus["format"], corpus["lines"]) == ("jsonl", 2)

    keys, total = stored_keys(store), api.get("/v1/corpora").json()["total"]
    refused = browser.post("/corpora", data=fields, files={"file": ("rows.txt", io.BytesIO(ROWS))})
    assert refused.status_code == 422 and "format=jsonl" in refused.text
    assert 'id="corpus-format" name="format" aria-describedby="help-format" aria-invalid="true"' in refused.text
    as_json = browser.post("/corpora", data=fields, files={"file": ("rows.txt", io.BytesIO(ROWS))},
                           headers={"Accept": "application/json"})
    assert as_json.status_code == 422 and as_json.json()["field"] == "format"
    assert (stored_keys(store), api.get("/v1/corpora").json()["total"]) == (keys, total)


def test_the_cli_leaves_the_format_to_the_server(api, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(client, "_client", lambda args: contextlib.nullcontext(api))
    (tmp_path / "rows.jsonl").write_bytes(ROWS)
    with pytest.raises(SystemExit) as exited:
        main(["corpus", "upload", str(tmp_path / "rows.jsonl"), "--domain", "news", "--language", "eng_Latn"])
    assert exited.value.code == 0
    assert json.loads(capsys.readouterr().out)["format"] == "jsonl"
