"""Exact-duplicate documents on the real stack (PostgreSQL, the S3 server): each corpus's share in its
statistics, the team's across corpora in GET /v1/corpora/duplicates and on the corpora page, and the
hashes the statistics store, gone with their corpus."""

import io
import re
from unittest import mock

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete

from tests.api.dashboard import sign_in
from tokenmill.corpora import statistics_runs
from tokenmill.corpora.duplicates import hashes_key
from tokenmill.corpora.statistics_runs import record_statistics
from tokenmill.db import transaction
from tokenmill.models import Corpus
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.store import ObjectNotFound

# 10 lines, 8 distinct: "shared one" and "own a" come twice. 8 lines, 7 distinct ("own b" twice), 2 of
# them the first corpus's ("shared one", "shared two"): 18 documents, 13 distinct texts in all, so
# 5 duplicates: 3 within a corpus and 2 across.
FIRST = ["shared one", "shared two", "own a", "shared one", "own a", "first 1", "first 2", "first 3", "first 4",
         "first 5"]
SECOND = ["shared one", "own b", "shared two", "own b", "second 1", "second 2", "second 3", "second 4"]


def upload(api, name: str, lines: list[str]) -> dict:
    response = api.post("/v1/corpora", data={"name": name, "domain": "news", "language": "eng_Latn"},
                        files={"file": (f"{name}.txt", io.BytesIO("\n".join(lines).encode()))})
    assert response.status_code == 201, response.text
    return response.json()


def with_statistics(api, sessionmaker, store, name: str, lines: list[str]) -> dict:
    """Upload a corpus and compute its statistics as the worker does; the corpus as the API shows it then."""
    corpus = upload(api, name, lines)
    assert record_statistics(sessionmaker, store, corpus["id"], WorkLimits(silent_after=600)) is True
    return api.get(f"/v1/corpora/{corpus['id']}").json()


@pytest.fixture
def two_corpora(api, sessionmaker, store, team_key):
    team, _ = team_key
    first = with_statistics(api, sessionmaker, store, "first", FIRST)
    second = with_statistics(api, sessionmaker, store, "second", SECOND)
    return team, first, second


def test_each_corpus_counts_its_own_duplicates(two_corpora):
    _, first, second = two_corpora
    assert (first["statistics"]["duplicate_documents"], first["statistics"]["duplicate_share"]) == (2, 0.2)
    assert (second["statistics"]["duplicate_documents"], second["statistics"]["duplicate_share"]) == (1, 1 / 8)


def test_the_team_share_counts_duplicates_within_and_across_corpora(api, sessionmaker, store, two_corpora):
    team, first, _ = two_corpora
    pending = upload(api, "pending", ["statistics not computed yet"])
    answer = api.get("/v1/corpora/duplicates")
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"corpora": 2, "corpora_left_out": 1, "documents": 18, "duplicate_documents": 5,
                             "duplicate_share": pytest.approx(5 / 18), "cross_corpus_duplicates": 2, "reason": None}
    # The hashes are a sorted array of 8 bytes a distinct document, beside the corpus.
    assert len(store.get_bytes(hashes_key(team.id, first["id"]))) == 8 * (10 - 2)
    assert record_statistics(sessionmaker, store, pending["id"], WorkLimits(silent_after=600)) is True
    after = api.get("/v1/corpora/duplicates").json()
    assert (after["corpora"], after["corpora_left_out"], after["documents"], after["duplicate_documents"]) == (3, 0, 19, 5)


def test_the_corpora_page_shows_the_shares(app_client, two_corpora, team_key):
    _, key = team_key
    client = TestClient(app_client.app)
    sign_in(client, key)
    page = client.get("/corpora")
    assert page.status_code == 200
    assert re.search(r'data-stat="team_duplicate_share">([^<]*)<', page.text).group(1) == "27.8 %"
    assert re.search(r'data-stat="team_cross_corpus_duplicates">([^<]*)<', page.text).group(1) == "2"
    assert sorted(re.findall(r'<td class="num" data-stat="duplicate_share">([^<]*)<', page.text)) == ["12.5 %", "20.0 %"]
    _, first, _ = two_corpora
    one = client.get(f"/corpora/{first['id']}")
    assert re.search(r'data-stat="duplicate_documents">([^<]*)<', one.text).group(1) == "2"


def test_deleting_a_corpus_deletes_its_hashes(api, store, two_corpora):
    team, first, second = two_corpora
    key = hashes_key(team.id, first["id"])
    assert store.get_bytes(key)
    assert api.delete(f"/v1/corpora/{first['id']}").status_code == 204
    with pytest.raises(ObjectNotFound):
        store.get_bytes(key)
    answer = api.get("/v1/corpora/duplicates").json()
    assert (answer["corpora"], answer["documents"], answer["duplicate_documents"]) == (1, 8, 1)
    assert store.get_bytes(hashes_key(team.id, second["id"]))


def test_hashes_of_a_corpus_deleted_while_its_statistics_ran_are_removed(api, sessionmaker, store, team_key):
    # The corpus goes (row and objects) after the worker read it and before it stored its hashes and
    # statistics: the worker, finding no row to record them in, removes the hashes it stored.
    team, _ = team_key
    corpus = upload(api, "short-lived", FIRST)
    compute = statistics_runs.corpus_statistics

    def deleted_meanwhile(store, row):
        result = compute(store, row)
        with transaction(sessionmaker) as session:
            session.execute(delete(Corpus).where(Corpus.id == row.id))
        return result

    with mock.patch.object(statistics_runs, "corpus_statistics", deleted_meanwhile):
        assert record_statistics(sessionmaker, store, corpus["id"], WorkLimits(silent_after=600)) is False
    with pytest.raises(ObjectNotFound):
        store.get_bytes(hashes_key(team.id, corpus["id"]))
