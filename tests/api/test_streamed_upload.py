"""POST /v1/corpora reads its multipart body as it streams: fields first, the file last, every refusal a 422 naming its field."""

import gzip
import hashlib

import pytest

from service.uploads import MAX_FIELD_BYTES, MAX_PARTS
from tests.api.test_corpora import PROBLEM, stored_keys

FIELDS = {"name": "streamed", "domain": "news", "language": "mul"}


def body(parts: list[tuple[str, bytes, str | None]], boundary: str = "b0undary", close: bool = True) -> bytes:
    """A multipart body of (name, value, filename) parts in this order."""
    out = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
    return out + (f"--{boundary}--\r\n".encode() if close else b"")


def post(api, content: bytes, content_type: str = "multipart/form-data; boundary=b0undary"):
    return api.post("/v1/corpora", content=content, headers={"Content-Type": content_type})


def form(fields: dict[str, str]) -> list[tuple[str, bytes, str | None]]:
    return [(name, value.encode(), None) for name, value in fields.items()]


def test_a_file_of_several_megabytes_streams_in_pieces_and_counts(api):
    # Three and a half pieces, multi-byte characters and lines cut across them by the client's chunks.
    line = "streamed 日本語 text\u3000with spaces\r\n".encode()
    data = line * (3_600_000 // len(line))
    corpus = post(api, body([*form(FIELDS), ("file", data, "big.txt")])).json()
    assert corpus["sha256"] == hashlib.sha256(data).hexdigest() and corpus["bytes"] == len(data)
    lines = data.decode().splitlines()
    assert (corpus["lines"], corpus["words"], corpus["characters"]) == (
        len(lines), sum(len(x.split()) for x in lines), sum(map(len, lines)))


@pytest.mark.parametrize("before", [0, 1, 2])
def test_fields_after_the_file_are_read_once_it_is_spooled(api, before):
    # curl -F file=@corpus.jsonl -F name=... : the file first, so it waits on disk for its fields.
    data = b'{"body": "one two"}\n\n{"body": "three"}\n' * 50_000  # past a megabyte: on disk
    fields = form({**FIELDS, "format": "jsonl", "text_field": "body"})
    corpus = post(api, body([*fields[:before], ("file", data, "c.jsonl"), *fields[before:]])).json()
    assert (corpus["lines"], corpus["words"], corpus["format"]) == (100_000, 150_000, "jsonl")
    assert corpus["sha256"] == hashlib.sha256(data).hexdigest()
    refused = post(api, body([*form({"name": "x"}), ("file", b"a\n", "a"), *form({"domain": "", "language": "en"})]))
    assert refused.status_code == 422 and refused.json()["field"] == "domain"


def test_a_compressed_file_and_unknown_fields_before_it_are_fine(api):
    data = b"uno dos\ntres\n"
    corpus = post(api, body([*form({**FIELDS, "comment": "ignored"}), ("file", gzip.compress(data), "c.gz")])).json()
    assert (corpus["lines"], corpus["words"], corpus["sha256"]) == (2, 3, hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize(("parts", "field"), [
    (form(FIELDS), "file"),  # no file at all
    ([*form(FIELDS), ("file", b"text\n", "c.txt"), ("format", b"text", None)], "format"),  # too late to read it
    ([*form(FIELDS), ("file", b"a\n", "a.txt"), ("file", b"b\n", "b.txt")], "file"),
    ([*form({**FIELDS, "name": "n" * (MAX_FIELD_BYTES + 1)}), ("file", b"a\n", "a.txt")], "name"),
    ([("domain", b"\xff\xfe", None), *form({"name": "x", "language": "en"}), ("file", b"a\n", "a")], "domain"),
    ([*form({f"extra{i}": "x" for i in range(MAX_PARTS)}), ("file", b"a\n", "a.txt")], "body"),
])
def test_a_form_out_of_order_or_out_of_bounds_is_refused_naming_the_field(api, store, parts, field):
    keys = stored_keys(store)
    response = post(api, body(parts))
    assert response.status_code == 422 and response.headers["content-type"] == PROBLEM, response.text
    assert response.json()["field"] == field, response.json()
    assert stored_keys(store) == keys  # nothing stored, nothing left


def test_a_body_that_is_not_a_whole_multipart_form_is_refused(api, store):
    keys = stored_keys(store)
    cut_short = post(api, body([*form(FIELDS), ("file", b"a line\n" * 1000, "c.txt")], close=False))
    not_multipart = post(api, b"name=x", "application/x-www-form-urlencoded")
    no_boundary = post(api, body(form(FIELDS)), "multipart/form-data")
    for response in (cut_short, not_multipart, no_boundary):
        assert response.status_code == 422 and response.json()["field"] == "body", response.text
    assert stored_keys(store) == keys
    assert api.get("/v1/corpora").json()["total"] == 0


def test_the_form_is_described_in_the_openapi_document(app_client):
    operation = app_client.get("/openapi.json").json()["paths"]["/v1/corpora"]["post"]
    schema = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert set(schema["required"]) == {"name", "domain", "language", "file"}
    assert "after the other fields" in schema["properties"]["file"]["description"]



def test_a_client_that_goes_away_mid_file_leaves_no_corpus(api, team_key, store):
    # The app called as the server calls it: fields and two megabytes of a file announced as four,
    # then the client is gone. Taking that for the end of the file would register a corpus cut short.
    _, key = team_key
    head = body(form(FIELDS))[: -len("--b0undary--\r\n")]
    head += b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="c.txt"\r\n\r\n'
    messages = [{"type": "http.request", "body": head + b"a line, and more\n" * 65536 * 2, "more_body": True},
                {"type": "http.disconnect"}]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/corpora", "raw_path": b"/v1/corpora", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80),
             "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {key}".encode()),
                         (b"content-type", b"multipart/form-data; boundary=b0undary"),
                         (b"content-length", str(len(head) + 4 * 1024**2).encode())]}
    sent = []

    async def receive():
        return messages.pop(0)

    async def send(message):
        sent.append(message)

    keys = stored_keys(store)
    api.portal.call(api.app, scope, receive, send)
    assert sent[0]["status"] == 422 and b"went away" in sent[1]["body"]
    assert api.get("/v1/corpora").json()["total"] == 0
    assert stored_keys(store) == keys
