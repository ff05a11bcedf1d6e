"""Damaged uploads, through the API and the dashboard: a 422 naming `file` (and the line), and nothing stored.

A zstd file cut short used to be stored as far as it went (54,614 lines of 100,000, the last
one cut); a JSON line nested 200,000 deep, or holding a million-digit integer, answered 500.
"""

import gzip

import pytest
import zstandard

from tests.api.test_corpora import PROBLEM
from tests.api.uploading import post_api, post_dashboard, signed_in, stored

LINES = b"".join(b"document %d of the corpus, a few words long\n" % number for number in range(100_000))
PACKED = zstandard.ZstdCompressor(write_checksum=True).compress(LINES)
GOOD = b'{"text": "a good line"}\n'


def corrupt(stream: bytes) -> bytes:
    damaged = bytearray(stream)
    damaged[len(stream) // 2:len(stream) // 2 + 8] = bytes(8)
    return bytes(damaged)


DAMAGED = {
    "zstd cut in half": (PACKED[:len(PACKED) // 2], {}, "truncated zstd data"),
    "zstd without its last byte": (PACKED[:-1], {}, "truncated zstd data"),
    "zstd header only": (PACKED[:6], {}, "truncated zstd data"),
    "corrupt zstd": (corrupt(PACKED), {}, "corrupt zstd data"),
    "gzip cut in half": (gzip.compress(LINES)[:200_000], {}, "truncated gzip data"),
    "corrupt gzip": (corrupt(gzip.compress(LINES)), {}, "corrupt gzip data"),
}
JSONL = {
    "200,000 nested brackets": (GOOD + b'{"text": "x", "n": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n", "line 2"),
    "nested objects": (GOOD * 2 + b'{"text": "x", "n": ' + b'{"a": ' * 100_000 + b"1" + b"}" * 100_001 + b"\n",
                       "line 3"),
    "a million-digit integer": (GOOD + b'{"text": "x", "n": ' + b"9" * 1_000_000 + b"}\n", "line 2"),
    "a line that is an array": (GOOD + b"\n" + b'["text", "x"]\n', "line 3"),
    "invalid JSON": (GOOD + b'{"text": "no end\n', "line 2"),
    "a text field that is a number": (GOOD + b'{"text": 12}\n', "line 2"),
    "a text field nested deep": (b'{"text": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n", "line 1"),
    "zstd of a deep line": (zstandard.ZstdCompressor().compress(GOOD + b'{"n": ' + b"[" * 200_000 + b"]" * 200_000
                                                                + b', "text": "x"}\n'), "line 2"),
}


@pytest.fixture
def browser(app_client, api):
    return signed_in(app_client, api)


@pytest.mark.parametrize("face", [post_api, post_dashboard], ids=["api", "dashboard"])
@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_damaged_compressed_file_is_refused_and_nothing_is_kept(api, browser, store, sessionmaker, team_key,
                                                                  face, name):
    data, fields, says = DAMAGED[name]
    response = face(browser if face is post_dashboard else api, data, "corpus.txt", fields)
    assert response.status_code == 422, response.text[:300]
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["field"] == "file" and says in response.json()["detail"]
    assert stored(store, sessionmaker, team_key[0].id) == (set(), 0, 0)


def test_the_whole_zstd_file_is_kept_with_every_line(api):
    corpus = post_api(api, PACKED, "corpus.txt.zst", {}).json()
    assert (corpus["lines"], corpus["bytes"]) == (100_000, len(LINES))


@pytest.mark.parametrize("face", [post_api, post_dashboard], ids=["api", "dashboard"])
@pytest.mark.parametrize("name", list(JSONL))
def test_a_jsonl_pathology_names_the_file_and_its_line(api, browser, store, sessionmaker, team_key, face, name):
    data, line = JSONL[name]
    response = face(browser if face is post_dashboard else api, data, "corpus.jsonl", {"format": "jsonl"})
    assert response.status_code == 422, response.text[:300]
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["field"] == "file" and line in problem["detail"], problem
    assert stored(store, sessionmaker, team_key[0].id) == (set(), 0, 0)


def test_the_dashboard_page_says_which_line(browser):
    page = post_dashboard(browser, JSONL["200,000 nested brackets"][0], "c.jsonl", {"format": "jsonl"}, as_json=False)
    assert page.status_code == 422 and "text/html" in page.headers["content-type"]
    assert "line 2 nests arrays or objects more than 128 levels deep" in page.text
    assert 'id="corpus-file" name="file" required aria-describedby="help-file" aria-invalid="true"' in page.text


def test_a_deep_first_line_without_a_format_is_text_not_a_fault(api):
    # Format detection reads the first line as JSON too: too deep to be read as an object, it is text.
    deep = b'{"a": ' + b"[" * 200_000 + b"]" * 200_000 + b"}\n"
    response = post_api(api, deep + b"more text\n", "corpus.txt", {})
    assert response.status_code == 201, response.text[:300]
    assert (response.json()["format"], response.json()["lines"]) == ("text", 2)
