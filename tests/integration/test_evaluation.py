"""Evaluation after training, reference baselines, premium and the dashboard matrix, on real services."""

import uuid

import pytest
from sqlalchemy import select

from tests.services import FIXTURES
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.evaluation.reports import fertility_matrix, version_evaluations
from tokenmill.jobs.pipeline import run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Evaluation, TokenizerVersion
from tokenmill.teams import create_team

METRIC_KEYS = {"tokens", "words", "characters", "bytes", "fertility", "chars_per_token", "bytes_per_token",
               "continued_word_rate", "unk_rate", "byte_fallback_rate", "roundtrip_rate", "vocab_utilization",
               "shannon_efficiency", "renyi_efficiency"}
LIMITS = {"max_bytes": 10**9, "max_line_bytes": 10**6}


def head(path, n: int) -> bytes:
    with path.open("rb") as handle:
        return b"".join(next(handle) for _ in range(n))


@pytest.fixture(scope="module")
def trained(sessionmaker, store):
    """A team with parallel English/Spanish/Chinese news and a code corpus, and one trained version."""
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"eval-{uuid.uuid4().hex[:8]}")
    flores = FIXTURES / "parallel_flores200_dev"
    corpora = [
        ingest_corpus(sessionmaker, store, team, CorpusFields(f"flores-{lang}", "news", lang, parallel_group="flores"),
                      [head(flores / f"{lang}.txt", 300)], **LIMITS)
        for lang in ("eng_Latn", "spa_Latn", "zho_Hans")
    ] + [ingest_corpus(sessionmaker, store, team, CorpusFields("python", "code", "python"),
                       [head(FIXTURES / "code" / "python.txt", 500)], **LIMITS)]
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, "news-bpe", {"vocab_size": 2000}, [str(c.id) for c in corpora[:3]], None)
    assert run_training_job(sessionmaker, store, job.id) == "succeeded"
    with sessionmaker() as session:
        version = session.scalar(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id))
    return team, corpora, version


def test_every_eval_corpus_has_all_metrics_and_a_curve(sessionmaker, trained):
    team, corpora, version = trained
    with sessionmaker() as session:
        items = version_evaluations(session, team, version)
    assert sorted(i["corpus_id"] for i in items) == sorted(str(c.id) for c in corpora)
    for item in items:
        assert set(item["metrics"]) >= METRIC_KEYS
        assert item["metrics"]["encoded_by"] == "tiktoken"  # byte-level BPE, ids proven equal
        assert item["metrics"]["roundtrip_rate"] == 1.0
        assert item["metrics"]["fertility"] == pytest.approx(item["metrics"]["tokens"] / item["metrics"]["words"])
        assert [p["vocab_size"] for p in item["metrics"]["vocab_curve"]] == [1000, 2000]
    by_language = {i["language"]: i for i in items}
    assert by_language["zho_Hans"]["word_rule"] == "whitespace+per-character"
    assert by_language["eng_Latn"]["word_rule"] == "whitespace"


def test_premium_is_tokens_over_the_english_pivot(sessionmaker, trained):
    team, _, version = trained
    with sessionmaker() as session:
        items = {i["language"]: i for i in version_evaluations(session, team, version)}
    english = items["eng_Latn"]["metrics"]["tokens"]
    assert items["eng_Latn"]["metrics"]["premium"] == 1.0
    assert items["spa_Latn"]["metrics"]["premium"] == pytest.approx(items["spa_Latn"]["metrics"]["tokens"] / english)
    assert "premium" not in items["python"]["metrics"]


def test_references_are_evaluated_once_per_corpus(sessionmaker, trained):
    team, corpora, _ = trained
    with sessionmaker() as session:
        rows = session.scalars(select(Evaluation).where(Evaluation.team_id == team.id, Evaluation.reference.is_not(None))).all()
    assert sorted((r.reference, r.corpus_id) for r in rows) == sorted(
        (name, c.id) for name in ("gpt2", "cl100k_base", "o200k_base", "bytes") for c in corpora)
    fertility = {r.reference: r.metrics["fertility"] for r in rows if r.corpus_id == corpora[2].id}
    # On Chinese, the larger vocabularies need fewer tokens per word; bytes are the floor: one token a byte.
    assert fertility["bytes"] > fertility["gpt2"] > fertility["cl100k_base"] > fertility["o200k_base"]
    by_bytes = next(r for r in rows if r.reference == "bytes" and r.corpus_id == corpora[2].id)
    assert by_bytes.metrics["tokens"] == by_bytes.metrics["bytes"] and by_bytes.metrics["bytes_per_token"] == 1.0


def test_dashboard_cells_sum_tokens_over_words_per_domain(sessionmaker, trained):
    team, _corpora, version = trained
    with sessionmaker() as session:
        matrix = fertility_matrix(session, team)
        items = version_evaluations(session, team, version)
    assert matrix["domains"] == ["code", "news"]
    row = next(r for r in matrix["rows"] if r["kind"] == "version")
    news = [i["metrics"] for i in items if i["domain"] == "news"]
    assert row["domains"]["news"]["fertility"] == pytest.approx(sum(m["tokens"] for m in news) / sum(m["words"] for m in news))
    assert row["languages"]["news/spa_Latn"]["fertility"] == pytest.approx(
        next(i["metrics"]["fertility"] for i in items if i["language"] == "spa_Latn"))
    assert row["premium"]["flores"]["eng_Latn"] == 1.0
    assert {r["label"] for r in matrix["rows"] if r["kind"] == "reference"} == {"gpt2", "cl100k_base", "o200k_base", "bytes"}


def test_no_premium_when_a_parallel_corpus_is_not_line_aligned(sessionmaker, store, trained):
    team, corpora, version = trained
    from tokenmill.evaluation.pipeline import run_evaluation
    from tokenmill.evaluation.submission import submit_run

    short = ingest_corpus(sessionmaker, store, team, CorpusFields("flores-fra-short", "news", "fra_Latn", parallel_group="flores"),
                          [head(FIXTURES / "parallel_flores200_dev" / "fra_Latn.txt", 150)], **LIMITS)
    with transaction(sessionmaker) as session:
        from tokenmill.models import Team

        owner = session.get_one(Team, team.id)
        run = submit_run(session, owner, "news-bpe", 1, None, [str(short.id), str(corpora[0].id)])
    assert run_evaluation(sessionmaker, store, run.id) == "succeeded"
    with sessionmaker() as session:
        items = {i["language"]: i for i in version_evaluations(session, team, version)}
    assert "premium" not in items["fra_Latn"]["metrics"]  # 150 lines against the pivot's 300
    assert items["eng_Latn"]["metrics"]["premium"] == 1.0
