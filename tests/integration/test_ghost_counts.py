"""Ghost-token data comes out of the worker's path: `run_training_job` in this process stores each
evaluation's clipped per-id counts (version and references), equal to counting the ids of the
corpus directly, on a small corpus and on one large enough to be measured in several processes."""

import uuid

import numpy as np
import pytest
from sqlalchemy import select
from tokenizers import Tokenizer

from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.evaluation.measuring import BATCH_LINES, SHARD_AFTER
from tokenmill.evaluation.references import BASELINES, REFERENCE_NAMES
from tokenmill.evaluation.token_counts import CLIP, unpack_counts
from tokenmill.jobs.pipeline import run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Evaluation, Team, TokenizerVersion
from tokenmill.playground.cost_report import measured_costs
from tokenmill.teams import create_team

LIMITS = {"max_bytes": 10**9, "max_line_bytes": 10**6}
SMALL = flores_lines(200, languages=("eng_Latn",))
# More lines than one process measures alone: the counts are merged from the shard processes.
LARGE = [f"{line} {i}" for i, line in enumerate(flores_lines(1000, languages=("deu_Latn",)) * 18)]


@pytest.fixture(scope="module")
def trained(sessionmaker, store):
    assert len(LARGE) > SHARD_AFTER * BATCH_LINES
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"ghosts-{uuid.uuid4().hex[:8]}")
    small = ingest_corpus(sessionmaker, store, team, CorpusFields("small", "news", "eng_Latn"),
                          ["\n".join(SMALL).encode()], **LIMITS)
    large = ingest_corpus(sessionmaker, store, team, CorpusFields("large", "news", "deu_Latn"),
                          ["\n".join(LARGE).encode()], **LIMITS)
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, "ghostly", {"vocab_size": 1500}, [str(small.id)], None)
    assert run_training_job(sessionmaker, store, job.id) == "succeeded"
    with sessionmaker() as session:
        version = session.scalar(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id))
        rows = session.scalars(select(Evaluation).where(Evaluation.team_id == team.id)).all()
    tokenizer = Tokenizer.from_str(store.get_bytes(next(f["key"] for f in version.files
                                                        if f["name"] == "tokenizer.json")).decode())
    return team, version, {"small": small, "large": large}, rows, tokenizer


def direct_counts(tokenizer: Tokenizer, lines: list[str]) -> np.ndarray:
    ids = [i for e in tokenizer.encode_batch(lines, add_special_tokens=False) for i in e.ids]
    return np.bincount(ids, minlength=tokenizer.get_vocab_size(with_added_tokens=True))


def test_every_evaluation_the_worker_stored_has_its_counts(trained):
    _, version, corpora, rows, tokenizer = trained
    subjects = {(r.reference or "version", r.corpus_id) for r in rows if r.metrics.get("token_counts")}
    assert subjects == {(s, c.id) for s in ("version", *BASELINES) for c in corpora.values()}
    mine = [r for r in rows if r.version_id == version.id]
    assert {r.metrics["encoded_by"] for r in mine} == {"tiktoken"}  # the rank file, proven equal to tokenizers
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    assert all(len(unpack_counts(r.metrics["token_counts"])) == size for r in mine)


@pytest.mark.parametrize("corpus", ["small", "large"])
def test_the_stored_counts_are_the_corpus_counted_directly(trained, corpus):
    _, version, corpora, rows, tokenizer = trained
    row = next(r for r in rows if r.version_id == version.id and r.corpus_id == corpora[corpus].id)
    lines = SMALL if corpus == "small" else LARGE
    expected = np.minimum(direct_counts(tokenizer, lines), CLIP)
    assert np.array_equal(unpack_counts(row.metrics["token_counts"]), expected)
    assert int(np.count_nonzero(expected)) == round(row.metrics["vocab_utilization"] * len(expected))


def test_the_report_counts_ghosts_over_both_corpora(trained, sessionmaker, store):
    team, version, _, _, tokenizer = trained
    with sessionmaker() as session:
        report = measured_costs(session, store, session.get_one(Team, team.id), version)
    total = direct_counts(tokenizer, SMALL) + direct_counts(tokenizer, LARGE)
    special = tokenizer.token_to_id("<|endoftext|>")
    considered = np.ones(len(total), dtype=bool)
    considered[special] = False
    mine = report["ghost_tokens"]["subjects"]["version"]
    assert (mine["corpora"], mine["of_corpora"]) == (2, 2)
    assert mine["never"] == int((considered & (total == 0)).sum())
    assert mine["rare"] == int((considered & (total < CLIP)).sum())
    assert all(total[t["id"]] == t["count"] < CLIP for t in mine["listed"])
    for name in REFERENCE_NAMES:
        assert report["ghost_tokens"]["subjects"][name]["available"] is True
        assert report["ghost_tokens"]["subjects"][name]["corpora"] == 2
