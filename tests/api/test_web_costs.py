"""The dashboard side of issue 13's cost report and small fixes, through the app: the version page's
"What this tokenizer costs", "not applicable" for a Unigram curve, the playground's prefilled
text tokenized on load, and a corpus's id and delete button."""

import io
import re

import pytest
from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec

LINES = flores_lines(80, languages=("eng_Latn", "spa_Latn"))


def version(sessionmaker, store, team, name: str, **spec) -> None:
    resolved = resolve_spec({"vocab_size": 300, **spec})
    tokenizer = with_tokenizers.train(resolved, LINES)
    files, _ = artifact_files(resolved, tokenizer)
    add_version(sessionmaker, store, team, name, resolved, files, tokenizer.get_vocab_size())


@pytest.fixture(scope="module")
def signed_in(app_client, sessionmaker, store):
    """A client signed in as a new team with a BPE and a Unigram version."""
    team, key = make_team(sessionmaker)
    version(sessionmaker, store, team, "bpe")
    version(sessionmaker, store, team, "uni", algorithm="unigram", byte_level=False, pre_tokenizer="metaspace")
    client = TestClient(app_client.app, follow_redirects=False)
    token = sign_in(client, key)
    return client, key, token


def test_the_version_page_shows_what_it_costs_next_to_the_references(signed_in):
    client, key, _ = signed_in
    page = client.get("/tokenizers/bpe/versions/1")
    assert page.status_code == 200
    html = page.text
    assert 'id="costs-h">What this tokenizer costs</h2>' in html
    report = client.get("/v1/tokenizers/bpe/versions/1/report", headers={"Authorization": f"Bearer {key}"}).json()
    for section in ("language_tax", "numbers", "indentation", "trailing_space", "letters_hidden", "ghost_tokens"):
        assert f'data-cost="{section}"' in html
    # The indentation cells carry the report's counts, version first.
    cells = re.findall(r'<td class="num" data-subject="([a-z0-9_]+)" data-tokens="(\d+)"', html.split('id="cost-indentation"')[1])
    expected = [(key_, str(report["indentation"][key_][i]["tokens"]))
                for i in range(4) for key_ in ("version", "gpt2", "cl100k_base", "o200k_base")]
    assert cells[:16] == expected
    assert 'data-subject="cl100k_base" data-consistency="1.0"' in html
    assert 'id="cost-ghosts-missing"' in html  # no evaluations were stored for this version


def test_a_unigram_curve_is_not_applicable_not_missing(signed_in):
    client, _, _ = signed_in
    unigram = client.get("/tokenizers/uni/versions/1").text
    curve = unigram.split('id="curve-h"')[1].split("</section>")[0]
    assert "Not applicable" in curve and "No data yet" not in curve
    assert 'id="curve-not-applicable"' in curve
    bpe = client.get("/tokenizers/bpe/versions/1").text.split('id="curve-h"')[1].split("</section>")[0]
    assert "No data yet" in bpe  # a BPE version without evaluations: its curve may still come


def test_the_playground_shows_its_prefilled_text_tokenized(signed_in):
    client, key, _ = signed_in
    html = client.get("/tokenizers/bpe/versions/1").text
    main = html.split('id="pg-main"')[1].split('id="pg-other"')[0]
    ids = [int(i) for i in re.findall(r'data-id="(\d+)"', main)]
    text = re.search(r'<textarea id="pg-text"[^>]*>([^<]*)</textarea>', html).group(1)
    encoded = client.post("/v1/tokenizers/bpe/versions/1/encode", json={"text": text},
                          headers={"Authorization": f"Bearer {key}"}).json()
    assert ids == encoded["ids"] and ids
    assert 'data-tokenizer="o200k_base"' in html.split('id="pg-other"')[1]


def upload(client, key: str, name: str) -> str:
    response = client.post("/v1/corpora", data={"name": name, "domain": "web", "language": "en"},
                           files={"file": (f"{name}.txt", io.BytesIO(b"words and more words\n"))},
                           headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def test_a_corpus_shows_its_id_and_is_deleted_by_its_button(signed_in, sessionmaker):
    client, key, token = signed_in
    corpus_id = upload(client, key, "doomed")
    page = client.get(f"/corpora/{corpus_id}").text
    assert f'<code class="corpus-id" id="corpus-id">{corpus_id}</code>' in page
    assert f'action="/corpora/{corpus_id}/delete"' in page
    assert f'action="/corpora/{corpus_id}/delete"' in client.get("/corpora").text
    # Without the session's CSRF token, nothing happens.
    assert client.post(f"/corpora/{corpus_id}/delete", data={}).status_code == 403
    assert client.get(f"/v1/corpora/{corpus_id}", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    # Another team's session cannot delete it either.
    other = TestClient(client.app, follow_redirects=False)
    other_token = sign_in(other, make_team(sessionmaker)[1])
    assert other.post(f"/corpora/{corpus_id}/delete", data={"csrf_token": other_token}).status_code == 404
    response = client.post(f"/corpora/{corpus_id}/delete", data={"csrf_token": token})
    assert response.status_code == 303 and response.headers["location"] == "/corpora?deleted=doomed"
    assert client.get(f"/v1/corpora/{corpus_id}", headers={"Authorization": f"Bearer {key}"}).status_code == 404
    listing = client.get(response.headers["location"]).text
    assert 'id="corpus-deleted"' in listing and corpus_id not in listing
