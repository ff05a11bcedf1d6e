"""POST /v1/bpe/steps: the step-through on a corpus, a stored version's replay, and what each refuses."""

import io
import json
import uuid

import pytest
from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.playground.bpe_steps import MAX_CHARACTERS, MAX_STEPS
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec

PROBLEM = "application/problem+json"
URL = "/v1/bpe/steps"


def refused(response, field: str, status: int = 422) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["field"] == field, body
    return body


def test_the_article_corpus_steps_to_its_sixteen_merges(api):
    response = api.post(URL, json={})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["mode"], body["tie_break"], body["end_of_word"], body["min_count"]) == ("corpus", "first_seen", "·", 2)
    assert (body["total_steps"], body["done"], body["next_start"]) == (16, True, None)
    assert [state["step"] for state in body["states"]] == list(range(17))
    first = body["states"][0]
    assert first["words"][0] == {"tokens": ["l", "o", "w", "·"], "count": 5}
    assert first["pairs"][:2] == [{"pair": ["e", "r"], "count": 9}, {"pair": ["r", "·"], "count": 9}]
    assert first["next"] == {"pair": ["e", "r"], "token": "er", "count": 9, "tied": [["r", "·"]], "ties": 1}
    assert first["vocabulary_size"] == 11 and body["vocabulary"][:11] == sorted("lowestnrid·")
    assert body["states"][1]["words"][3] == {"tokens": ["w", "i", "d", "er", "·"], "count": 3}
    assert [m["token"] for m in body["merges"]][:3] == ["er", "er·", "ne"]
    assert body["states"][-1]["next"] is None and body["states"][-1]["vocabulary_size"] == 27


def test_the_tokenizers_rule_and_a_window_of_states(api):
    body = api.post(URL, json={"tie_break": "tokenizers", "steps": 5, "start": 3}).json()
    assert body["tie_break"] == "tokenizers" and "ids" in body["tie_break_label"]
    assert [m["pair"] for m in body["merges"]] == [["e", "r"], ["er", "·"], ["e", "w"], ["n", "ew"], ["l", "o"]]
    assert [state["step"] for state in body["states"]] == [3, 4, 5]
    assert (body["total_steps"], body["done"]) == (5, False)  # stopped by `steps`, not by the corpus
    plain = api.post(URL, json={"corpus": "aa ab", "end_of_word": False, "min_count": 1}).json()
    assert plain["end_of_word"] is None and [m["token"] for m in plain["merges"]] == ["aa", "ab"]


def test_a_large_corpus_comes_in_windows(api):
    text = "\n".join(flores_lines(120, languages=("eng_Latn",)))[:MAX_CHARACTERS]
    first = api.post(URL, json={"corpus": text}).json()
    assert first["total_steps"] == MAX_STEPS and first["next_start"] is not None
    assert len(first["states"]) == first["next_start"]
    more = api.post(URL, json={"corpus": text, "start": first["next_start"]}).json()
    assert more["states"][0]["step"] == first["next_start"]
    assert more["merges"] == first["merges"]


@pytest.mark.parametrize(("body", "field"), [
    ({"corpus": "a " * (MAX_CHARACTERS // 2 + 1)}, "corpus"),
    ({"corpus": "   "}, "corpus"),
    ({"corpus": "col·legi"}, "corpus"),  # the end-of-word marker inside a word
    ({"steps": MAX_STEPS + 1}, "steps"),
    ({"steps": -1}, "steps"),
    ({"steps": "many"}, "steps"),
    ({"start": MAX_STEPS + 1}, "start"),
    ({"tie_break": "alphabetical"}, "tie_break"),
    ({"min_count": 0}, "min_count"),
    ({"merges": 3}, "merges"),
    ({"corpus_id": str(uuid.uuid4())}, "corpus_id"),  # a corpus to sample, without a version
    ({"tokenizer": "t"}, "corpus_id"),
    ({"tokenizer": "t", "corpus_id": str(uuid.uuid4()), "tie_break": "tokenizers"}, "tie_break"),
    ({"tokenizer": "t", "corpus_id": "not-a-uuid"}, "corpus_id"),
    ({"tokenizer": "t", "corpus_id": str(uuid.uuid4()), "lines": 0}, "lines"),
])
def test_bad_bodies_are_refused_naming_the_field(api, body, field):
    refused(api.post(URL, json=body), field)


def test_it_needs_an_api_key(app_client):
    assert app_client.post(URL, json={}).status_code == 401


def upload(api, text: str) -> str:
    form = {"name": "sample", "domain": "news", "language": "eng_Latn"}
    response = api.post("/v1/corpora", data=form, files={"file": ("c.txt", io.BytesIO(text.encode()))})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def trained_version(sessionmaker, store, team, texts: list[str], **spec) -> tuple[str, list[list[str]]]:
    """Version 1 of a new name, trained on the texts; its name and merges."""
    resolved = resolve_spec({"vocab_size": 400, **spec})
    tokenizer = with_tokenizers.train(resolved, texts)
    files, _ = artifact_files(resolved, tokenizer)
    name = f"bpe-{uuid.uuid4().hex[:6]}"
    add_version(sessionmaker, store, team, name, resolved, files, tokenizer.get_vocab_size())
    model = json.loads(files["tokenizer.json"])["model"]
    return name, model.get("merges", [])


def test_a_version_replays_its_first_merges_on_a_sample(api, team_key, sessionmaker, store):
    team, _ = team_key
    texts = flores_lines(12, languages=("eng_Latn",))
    name, merges = trained_version(sessionmaker, store, team, texts)  # byte-level, split by GPT-2's regex
    corpus_id = upload(api, "\n".join(texts) + "\n")
    response = api.post(URL, json={"tokenizer": name, "version": 1, "corpus_id": corpus_id, "steps": 30,
                                   "lines": 12})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["mode"], body["tokenizer"], body["version"], body["corpus_id"]) == ("version", name, 1, corpus_id)
    assert body["sample"] == {"lines": 12, "characters": sum(map(len, texts)), "truncated": False}
    assert [m["pair"] for m in body["merges"]] == merges[:30]
    assert body["states"][0]["words"][0]["tokens"][0] != "Ġ"  # the first word of a line has no space before it
    assert any(word["tokens"][0] == "Ġ" for word in body["states"][0]["words"])
    # The sample is the version's training text: each merge it made was the sample's most frequent pair.
    for state in body["states"][:-1]:
        assert state["next"]["count"] == state["pairs"][0]["count"] > 0, state["step"]
        assert state["next"]["rank"] is not None
    assert body["states"][-1]["next"] is None and body["total_steps"] == 30


def test_another_teams_version_or_corpus_is_not_found(api, team_key, sessionmaker, store):
    team, _ = team_key
    other, other_key = make_team(sessionmaker)
    texts = flores_lines(4, languages=("eng_Latn",))
    theirs, _ = trained_version(sessionmaker, store, other, texts)
    ours, _ = trained_version(sessionmaker, store, team, texts)
    corpus_id = upload(api, "\n".join(texts))
    api.headers["Authorization"] = f"Bearer {other_key}"
    their_corpus = upload(api, "\n".join(texts))
    api.headers["Authorization"] = f"Bearer {team_key[1]}"
    cases = [{"tokenizer": theirs, "version": 1, "corpus_id": corpus_id},
             {"tokenizer": ours, "version": 1, "corpus_id": their_corpus},
             {"tokenizer": ours, "version": 2, "corpus_id": corpus_id}]
    for body in cases:
        response = api.post(URL, json={**body, "steps": 3})
        assert response.status_code == 404, (body, response.text)
        assert response.headers["content-type"].startswith(PROBLEM)
    assert api.post(URL, json={"tokenizer": ours, "corpus_id": corpus_id, "steps": 3}).status_code == 200  # latest


def test_a_unigram_version_has_no_merges_to_replay(api, team_key, sessionmaker, store):
    team, _ = team_key
    texts = flores_lines(20, languages=("eng_Latn",))
    name, _ = trained_version(sessionmaker, store, team, texts, algorithm="unigram", vocab_size=100)
    body = refused(api.post(URL, json={"tokenizer": name, "corpus_id": upload(api, "\n".join(texts))}), "tokenizer")
    assert "Unigram" in body["detail"]


def test_the_page_without_script_shows_the_state_its_query_names(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    client = TestClient(app_client.app, follow_redirects=False)
    token = sign_in(client, key)
    page = client.get("/bpe", params={"step": 3})
    assert page.status_code == 200, page.text[:300]
    assert 'data-step="3" data-total="16"' in page.text
    assert 'value="2" data-go="back"' in page.text and 'value="4" data-go="step"' in page.text
    assert 'data-pair="ne w" data-count="8" data-next="true"' in page.text  # merge 4, highlighted in the chart
    merges = page.text[page.text.index('id="bpe-merges"'):]
    assert merges.count("<li data-i=") == 16 and merges.count(" hidden>") == 13  # three merges shown so far
    too_long = client.get("/bpe", params={"corpus": "ab " * 4000})
    assert too_long.status_code == 422 and 'href="#corpus"' in too_long.text  # said on the form, at the field
    # The page's script: its CSRF header is required; with it, ready HTML for each state.
    assert client.post("/bpe/steps", json={}, headers={"Accept": "application/json"}).status_code == 403
    states = client.post("/bpe/steps", json={"start": 14}, headers={"X-CSRF-Token": token}).json()
    assert [s["step"] for s in states["states"]] == [14, 15, 16] and states["total_steps"] == 16
    assert "No pair occurs 2 times" in states["states"][-1]["html"] and 'id="bpe-merges"' in states["lists"]
