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
