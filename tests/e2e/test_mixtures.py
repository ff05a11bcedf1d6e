"""Mixtures and deduplication on the real stack (issue 25.1-2): the job draws its documents as
the spec says, records what it trained on per corpus and language, and says so in its notes and
on the version page; bad weights are a 422 naming spec.mixture."""

import httpx
import pytest

from tests.api.dashboard import sign_in
from tests.e2e.test_evaluations import upload_head
from tests.e2e.test_walking_skeleton import wait_for_job
from tests.services import FIXTURES
from tests.stack import unique

FLORES = FIXTURES / "parallel_flores200_dev"
SIZES = {"eng_Latn": 800, "fra_Latn": 200, "hin_Deva": 50}  # lines: very different sizes


@pytest.fixture
def languages(http):
    return {language: upload_head(http, FLORES / f"{language}.txt", lines, name=language, domain="news",
                                  language=language) for language, lines in SIZES.items()}


def trained(http, spec, corpora):
    name = unique("mix")
    job = http.post("/v1/jobs", json={"tokenizer": name, "train_corpora": [c["id"] for c in corpora],
                                      "eval_corpora": [], "spec": spec})
    assert job.status_code == 202, job.text
    done = wait_for_job(http, job.json()["id"])
    assert done["status"] == "succeeded", done
    version = http.get(f"/v1/tokenizers/{name}/versions/1").json()
    return done, version


def test_a_language_temperature_of_zero_trains_on_every_language_alike(http, languages, stack, team_key):
    corpora = list(languages.values())
    done, version = trained(http, {"library": "tokenmill", "vocab_size": 600,
                                   "mixture": {"language_temperature": 0}}, corpora)
    drawn = version["lineage"]["training_data"]
    raw = sum(c["bytes"] for c in corpora)
    shares = {language: part["share"] for language, part in drawn["languages"].items()}
    # Hindi (50 lines of about 3 times the bytes of an English line) read about 3 times over.
    assert all(abs(share - 1 / 3) < 0.06 for share in shares.values()), shares
    assert abs(sum(part["trained_bytes"] for part in drawn["languages"].values()) - raw) < 0.1 * raw
    hindi = next(row for row in drawn["corpora"] if row["language"] == "hin_Deva")
    assert hindi["rate"] > 2.5 and hindi["trained_documents"] >= int(hindi["rate"]) * hindi["documents"]
    assert any(note.startswith("trained on ") and "hin_Deva" in note for note in done["notes"]), done["notes"]
    with httpx.Client(base_url=stack, timeout=60) as browser:
        sign_in(browser, team_key[1])
        page = browser.get(f"/tokenizers/{version['name']}/versions/1")
    assert page.status_code == 200 and 'id="training-data"' in page.text and "hin_Deva" in page.text


def test_weights_distributed_weigh_each_part_and_leave_a_zero_corpus_out(http, languages):
    eng, fra, hin = languages.values()
    spec = {"library": "rustbpe", "counting": "distributed", "vocab_size": 500, "min_frequency": 1,
            "mixture": {"weights": {eng["id"]: 0, fra["id"]: 1, hin["id"]: 3}}}
    _, version = trained(http, spec, [eng, fra, hin])
    drawn = version["lineage"]["training_data"]
    by_language = {row["language"]: row for row in drawn["corpora"]}
    assert drawn["weighted_counts"] is True and by_language["eng_Latn"]["trained_bytes"] == 0
    total = sum(c["bytes"] for c in (eng, fra, hin))
    assert by_language["hin_Deva"]["trained_bytes"] == pytest.approx(0.75 * total, rel=0.01)
    # No English text was counted: its common words are not tokens of their own.
    vocabulary = http.get(f"/v1/tokenizers/{version['name']}/versions/1/files/vocab.json").json()
    assert "Ġthe" not in vocabulary and "Ġde" in vocabulary


def test_deduplicate_trains_on_each_distinct_document_once(http, languages):
    again = upload_head(http, FLORES / "eng_Latn.txt", 200, name="eng-again", domain="news", language="eng_Latn")
    corpora = [languages["eng_Latn"], again]
    done, version = trained(http, {"library": "tokenmill", "vocab_size": 400, "deduplicate": True}, corpora)
    drawn = version["lineage"]["training_data"]
    assert drawn["duplicates_dropped"] == 200
    assert [row["trained_documents"] for row in drawn["corpora"]] == [800, 0]
    assert any("200 duplicate documents dropped" in note for note in done["notes"]), done["notes"]


def test_weights_naming_a_corpus_not_trained_on_are_refused(http, languages):
    eng, fra, _ = languages.values()
    response = http.post("/v1/jobs", json={"tokenizer": unique("mix"), "train_corpora": [eng["id"]],
                                           "spec": {"mixture": {"weights": {eng["id"]: 1, fra["id"]: 1}}}})
    assert response.status_code == 422 and response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["field"] == "spec.mixture" and fra["id"] in problem["detail"], problem
