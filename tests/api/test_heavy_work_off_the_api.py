"""Work on request data runs outside the process that answers reads (issue 20.1): a submitted regex
is compiled and probed in sandbox processes, BPE steps learn and replay there, on the submitting
team's share of the pool; the cost report and the version diff are kept, not recomputed per view.

The TestClient runs the API in this very process, so this process's memory and CPU time are the API's."""

import random

import psutil
import pytest

from tests.api.test_bpe_steps import trained_version, upload
from tests.text import flores_lines
from tokenmill.playground.bpe_steps import step_through
from tokenmill.sandboxed import sandbox

# Seventeen characters the `regex` module expands into a program of ~250 MB (and its nested form into 3 GB).
HUGE = "(?:a{1000}){1000}"
HUGER = "(?:(?:a{1000}){1000}){10}"


@pytest.fixture
def corpus_id(api):
    return upload(api, "some text here\nand more text\n")


def submit(api, corpus_id, pattern):
    return api.post("/v1/jobs", json={"tokenizer": "t", "train_corpora": [corpus_id],
                                      "spec": {"vocab_size": 1000, "pre_tokenizer": "none",
                                               "pre_tokenizer_regex": pattern}})


def test_a_huge_regex_is_compiled_outside_the_api(api, corpus_id):
    api_process = psutil.Process()
    before = api_process.memory_info().rss
    for _ in range(3):
        submit(api, corpus_id, HUGE)  # compiles within the sandbox's limits: it may be accepted
    nested = submit(api, corpus_id, HUGER)
    grown = api_process.memory_info().rss - before
    assert grown < 64 * 2**20, f"the API process grew {grown / 2**20:.0f} MiB"
    assert nested.status_code == 422, nested.text
    assert nested.json()["field"] == "spec.pre_tokenizer_regex"
    assert "to compile" in nested.json()["detail"]


def test_a_regex_check_runs_on_the_teams_share(api, corpus_id, team_key):
    pool = sandbox.current()
    team, _ = team_key
    seen: list[str | None] = []
    take = pool._take

    def spy(owner):
        seen.append(owner)
        return take(owner)

    pool._take = spy  # type: ignore[method-assign]
    try:
        assert submit(api, corpus_id, r"\p{L}+|\s+").status_code == 202
    finally:
        del pool._take
    assert seen and set(seen) == {str(team.id)}


def test_bpe_steps_are_learned_in_the_sandbox_on_the_teams_share(api, team_key):
    team, _ = team_key
    rng = random.Random(5)
    corpus = "".join(rng.choice("abcdefghijklmnopqrstuvwxyzéèàçñößøåæœабвгдежзий    ") for _ in range(10_000))
    pool = sandbox.current()
    owners: list[str | None] = []
    take = pool._take

    def spy(owner):
        owners.append(owner)
        return take(owner)

    pool._take = spy  # type: ignore[method-assign]
    try:
        response = api.post("/v1/bpe/steps", json={"corpus": corpus, "steps": 500, "start": 490})
    finally:
        del pool._take
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["total_steps"] == 500
    assert [m["pair"] for m in body["merges"]] == [list(m.pair) for m in step_through(corpus, 500).merges]
    assert owners == [str(team.id)]


def test_a_replay_runs_in_the_sandbox_on_the_teams_share(api, team_key, sessionmaker, store):
    team, _ = team_key
    texts = flores_lines(12, languages=("eng_Latn",))
    name, merges = trained_version(sessionmaker, store, team, texts)
    corpus = upload(api, "\n".join(texts) + "\n")
    checkouts = sandbox.current().stats()["checkouts_total"]
    response = api.post("/v1/bpe/steps", json={"tokenizer": name, "corpus_id": corpus, "steps": 5, "lines": 12})
    assert response.status_code == 200, response.text
    assert [m["pair"] for m in response.json()["merges"]] == merges[:5]
    assert sandbox.current().stats()["checkouts_total"] > checkouts
