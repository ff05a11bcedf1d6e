"""POST/GET/DELETE /v1/corpora against PostgreSQL and the S3 server."""

import gzip
import hashlib
import io
import json

import zstandard

from tests.services import FIXTURES

PROBLEM = "application/problem+json"


def upload(api, data: bytes, **fields):
    form = {"name": "c", "domain": "news", "language": "eng_Latn", **fields}
    return api.post("/v1/corpora", data=form, files={"file": ("c.txt", io.BytesIO(data))})


def test_upload_counts_and_hashes_a_real_corpus(api, store):
    data = b"".join((FIXTURES / "fortunes" / "deu_Latn.txt").open("rb").readlines()[:300])
    response = upload(api, data, name="fortunes-de", domain="fortunes", language="deu_Latn")
    assert response.status_code == 201, response.text
    corpus = response.json()
    lines = data.decode().splitlines()
    assert corpus["sha256"] == hashlib.sha256(data).hexdigest()
    assert corpus["bytes"] == len(data)
    assert corpus["lines"] == len(lines)
    assert corpus["words"] == sum(len(line.split()) for line in lines)
    assert corpus["characters"] == sum(len(line) for line in lines)
    assert api.get(f"/v1/corpora/{corpus['id']}").json()["sha256"] == corpus["sha256"]


def test_gzip_and_zstd_are_recognised_by_content(api):
    text = b"uno dos tres\ncuatro cinco\n"
    plain = upload(api, text).json()
    for packed in (gzip.compress(text[:10]) + gzip.compress(text[10:]), zstandard.ZstdCompressor().compress(text)):
        corpus = upload(api, packed).json()
        assert (corpus["sha256"], corpus["lines"], corpus["words"]) == (plain["sha256"], 2, 5)


def test_jsonl_reads_the_text_field(api):
    rows = [{"body": "hello world"}, {"body": "tres palabras aquí"}]
    data = "\n".join(json.dumps(r) for r in rows).encode()
    corpus = upload(api, data, format="jsonl", text_field="body").json()
    assert (corpus["lines"], corpus["words"]) == (2, 5)
    bad = upload(api, data, format="jsonl", text_field="missing")
    assert bad.status_code == 422 and bad.json()["field"] == "text_field"


def stored_keys(store) -> set[str]:
    listing = store.client.list_objects_v2(Bucket=store.bucket, Prefix=f"{store.prefix}/corpora/")
    return {item["Key"] for item in listing.get("Contents", [])}


def test_bad_uploads_answer_problem_json_and_leave_nothing(api, store):
    before = api.get("/v1/corpora").json()["total"]
    keys_before = stored_keys(store)
    cases = [
        (b"", {}, "file"),
        (b"\n\n  \n", {}, "file"),
        (b"ok line\nbad \xff\xfe bytes\n", {}, "file"),
        (gzip.compress(b"truncated text " * 100, mtime=0)[:-12], {}, "file"),
        (b"text", {"format": "csv"}, "format"),
        (b"text", {"domain": ""}, "domain"),
        (b'{"text": "fine"}\n{"text": "half a pair \\ud800 here"}\n', {"format": "jsonl"}, "file"),
    ]
    for data, fields, field in cases:
        response = upload(api, data, **fields)
        assert response.status_code == 422, (fields, response.text)
        assert response.headers["content-type"] == PROBLEM
        assert response.json()["field"] == field
    assert "line 2" in upload(api, b"ok line\nbad \xff\xfe bytes\n").json()["detail"]
    assert "line 2" in upload(api, b'{"text": "ok \\ud83d\\udc4b"}\n{"text": "\\udc4b"}\n', format="jsonl").json()["detail"]
    missing = api.post("/v1/corpora", data={"name": "x"}, files={"file": ("x", b"a")})
    assert missing.status_code == 422 and missing.headers["content-type"] == PROBLEM
    assert api.get("/v1/corpora").json()["total"] == before
    assert stored_keys(store) == keys_before


def test_list_is_paginated_and_delete_removes_row_and_object(api, store):
    ids = [upload(api, f"doc {i}\n".encode(), name=f"c{i}").json()["id"] for i in range(3)]
    page = api.get("/v1/corpora?limit=2&page=1").json()
    assert (len(page["items"]), page["total"], page["page"], page["limit"]) == (2, 3, 1, 2)
    assert len(api.get("/v1/corpora?limit=2&page=2").json()["items"]) == 1
    corpus = api.get(f"/v1/corpora/{ids[0]}").json()
    assert api.delete(f"/v1/corpora/{ids[0]}").status_code == 204
    assert api.get(f"/v1/corpora/{ids[0]}").status_code == 404
    assert api.get("/v1/corpora").json()["total"] == 2
    assert corpus["sha256"]


def test_auth_and_team_isolation(app_client, api, team_key):
    corpus = upload(api, b"mine\n").json()
    assert app_client.get("/v1/corpora", headers={"Authorization": ""}).status_code == 401
    wrong = app_client.get("/v1/corpora", headers={"Authorization": "Bearer tm_nope"})
    assert wrong.status_code == 401 and wrong.headers["content-type"] == PROBLEM
    from tokenmill.db import transaction
    from tokenmill.teams import create_team

    factory = app_client.app.state.sessionmaker
    with transaction(factory) as session:
        _, other_key = create_team(session, f"other-{corpus['id'][:8]}")
    other = {"Authorization": f"Bearer {other_key}"}
    assert app_client.get(f"/v1/corpora/{corpus['id']}", headers=other).status_code == 404
    assert app_client.delete(f"/v1/corpora/{corpus['id']}", headers=other).status_code == 404
    assert app_client.get("/v1/corpora", headers=other).json()["total"] == 0
