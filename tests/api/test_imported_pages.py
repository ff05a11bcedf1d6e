"""An imported version (tokenmill.versions.imports) appears where a trained one does: its page,
with the playground and the diff from the version before, and the API's reads."""

import re

from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.text import flores_lines
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec


def test_imported_versions_have_pages_and_a_diff(app_client: TestClient, team_key):
    _, key = team_key
    texts = flores_lines(40, languages=("eng_Latn",))
    first = with_tokenizers.train(resolve_spec({"vocab_size": 320}), texts).to_str().encode()
    second = with_tokenizers.train(resolve_spec({"vocab_size": 360}), texts).to_str().encode()
    with TestClient(app_client.app) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        for data in (first, second):
            answer = client.post("/v1/tokenizers/mine/versions", files={"file": ("tokenizer.json", data)})
            assert answer.status_code == 201, answer.text
        assert answer.json()["version"] == 2 and answer.json()["lineage"]["imported"]["format"] == "tokenizer.json"
        del client.headers["Authorization"]
        sign_in(client, key)
        page = client.get("/tokenizers/mine/versions/2")
        assert page.status_code == 200, page.text[:500]
        assert 'id="imported-from"' in page.text and "tokenizer.json" in page.text
        added = re.search(r'id="diff-added-count">([\d,]+)<', page.text)
        assert added and int(added.group(1).replace(",", "")) == 40  # version 2 learned 40 more merges


def test_the_vocabulary_by_script_of_a_version_and_the_references(app_client, team_key, sessionmaker):
    _, key = team_key
    texts = flores_lines(30, languages=("eng_Latn", "rus_Cyrl", "zho_Hans"))
    data = with_tokenizers.train(resolve_spec({"vocab_size": 900}), texts).to_str().encode()
    with TestClient(app_client.app) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        assert client.post("/v1/tokenizers/mixed/versions", files={"file": ("tokenizer.json", data)}).status_code == 201
        answer = client.get("/v1/tokenizers/mixed/versions/1/vocabulary")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert [s["key"] for s in body["subjects"]] == ["version", "gpt2", "cl100k_base", "o200k_base"]
        version = body["subjects"][0]
        assert version["total"] == 900 and sum(version["counts"].values()) == 900
        counts = version["counts"]
        assert counts["Latin"] > 0 and counts["Cyrillic"] > 0 and counts["Han"] > 0
        assert counts["special"] == 1  # <|endoftext|>
        assert counts["partial UTF-8"] > 0  # byte-level pieces of Cyrillic and Han characters
        o200k = body["subjects"][3]["counts"]
        assert o200k["Cyrillic"] > 10 * body["subjects"][1]["counts"]["Cyrillic"]  # o200k holds far more than gpt2
        del client.headers["Authorization"]
        sign_in(client, key)
        page = client.get("/tokenizers/mixed/versions/1")
        assert page.status_code == 200 and 'id="vocabulary-by-script"' in page.text and "Cyrillic" in page.text
