"""The vocabulary-size curve is measured once per version, stored with its evaluations and read back
(old versions' per-corpus curves too), on real services."""

import uuid

from sqlalchemy import select

import tokenmill.evaluation.measuring as evaluation
from tests.services import FIXTURES
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.evaluation.pipeline import run_evaluation
from tokenmill.evaluation.reports import has_version_curve, version_curve
from tokenmill.evaluation.submission import submit_run
from tokenmill.jobs.pipeline import run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Evaluation, Team, TokenizerVersion
from tokenmill.teams import create_team

LIMITS = {"max_bytes": 10**9, "max_line_bytes": 10**6}


def head(path, n: int) -> bytes:
    with path.open("rb") as handle:
        return b"".join(next(handle) for _ in range(n))


def test_the_curve_is_measured_once_per_version(sessionmaker, store, monkeypatch):
    samples = []
    measured = evaluation.vocab_curve
    monkeypatch.setattr(evaluation, "vocab_curve", lambda files, manifest, sample: samples.append(len(sample))
                        or measured(files, manifest, sample))
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"curve-{uuid.uuid4().hex[:8]}")
    flores = FIXTURES / "parallel_flores200_dev"
    corpora = [ingest_corpus(sessionmaker, store, team, CorpusFields(f"flores-{lang}", "news", lang),
                             [head(flores / f"{lang}.txt", 300)], **LIMITS) for lang in ("eng_Latn", "zho_Hans")]
    corpora.append(ingest_corpus(sessionmaker, store, team, CorpusFields("python", "code", "python"),
                                 [head(FIXTURES / "code" / "python.txt", 500)], **LIMITS))
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, "curve-bpe", {"vocab_size": 2000}, [str(c.id) for c in corpora[:2]],
                            [str(c.id) for c in corpora])
    assert run_training_job(sessionmaker, store, job.id) == "succeeded"
    assert samples == [300 + 300 + 500]  # once, on the first lines of every corpus together
    with sessionmaker() as session:
        version = session.scalar(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id))
        rows = session.scalars(select(Evaluation).where(Evaluation.version_id == version.id)).all()
        curve = version_curve(session, team, version)
        assert has_version_curve(session, version.id)
    assert len(rows) == 3
    assert all(r.metrics["vocab_curve_sample"] == {"corpora": 3, "lines": 1100} for r in rows)
    assert len({str(r.metrics["vocab_curve"]) for r in rows}) == 1  # the same curve on each
    [series] = curve
    assert series["label"] == "1,100 lines of 3 corpora" and series["points"] == rows[0].metrics["vocab_curve"]
    assert [p["vocab_size"] for p in series["points"]] == [1000, 2000]
    assert series["points"][0]["fertility"] > series["points"][1]["fertility"]

    # An evaluation run of the version measures its corpora, not the curve again.
    with transaction(sessionmaker) as session:
        run = submit_run(session, session.get_one(Team, team.id), "curve-bpe", 1, None, [str(corpora[0].id)])
    assert run_evaluation(sessionmaker, store, run.id) == "succeeded"
    assert samples == [1100]
    with sessionmaker() as session:
        assert version_curve(session, team, version) == curve


def test_a_version_evaluated_before_keeps_its_curves_per_corpus(sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"legacy-{uuid.uuid4().hex[:8]}")
    corpora = [ingest_corpus(sessionmaker, store, team, CorpusFields(f"c-{lang}", "news", lang),
                             [f"a line in {lang}\n".encode()], **LIMITS) for lang in ("eng_Latn", "spa_Latn")]
    points = {lang: [{"vocab_size": 1000, "fertility": f, "chars_per_token": 3.0}]
              for lang, f in (("eng_Latn", 1.5), ("spa_Latn", 1.7))}
    with transaction(sessionmaker) as session:
        version = TokenizerVersion(team_id=team.id, name="old", version=1, spec={"algorithm": "bpe"}, vocab_size=1000,
                                   files=[], lineage={}, train_seconds=1.0, peak_memory_bytes=0)
        session.add(version)
        session.flush()
        session.add_all(Evaluation(team_id=team.id, version_id=version.id, corpus_id=c.id, word_rule="whitespace",
                                   metrics={"tokens": 1, "words": 1, "vocab_curve": points[c.language]})
                        for c in corpora)
    with sessionmaker() as session:
        version = session.get_one(TokenizerVersion, version.id)
        assert not has_version_curve(session, version.id)
        assert version_curve(session, team, version) == [
            {"label": f"c-{lang} ({lang})", "corpora": 1, "lines": None, "points": points[lang]}
            for lang in ("eng_Latn", "spa_Latn")]
