"""Parity-aware training: a parallel group's languages get closer token counts than plain BPE gives them."""

import uuid

import pytest
from sqlalchemy import select
from tokenizers import Tokenizer

from tests.text import FLORES
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.errors import InvalidInput
from tokenmill.jobs.pipeline import run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import TokenizerVersion
from tokenmill.teams import create_team

LANGUAGES = ("eng_Latn", "hin_Deva", "arb_Arab")
SPEC = {"vocab_size": 1500}


@pytest.fixture
def parallel(sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"parity-{uuid.uuid4().hex[:8]}")
    corpora = {}
    for language in LANGUAGES:
        text = (FLORES / f"{language}.txt").read_bytes()
        corpora[language] = ingest_corpus(sessionmaker, store, team,
                                          CorpusFields(f"flores-{language}", "news", language, parallel_group="flores"),
                                          [text], max_bytes=10**9, max_line_bytes=10**6)
    return team, corpora


def trained(sessionmaker, store, team, corpora, spec) -> Tokenizer:
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, f"t-{uuid.uuid4().hex[:6]}", spec, [str(c.id) for c in corpora.values()], [])
    assert run_training_job(sessionmaker, store, job.id) == "succeeded"
    with sessionmaker() as session:
        version = session.scalar(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id))
    entry = next(e for e in version.files if e["name"] == "tokenizer.json")
    return Tokenizer.from_str(store.get_bytes(entry["key"]).decode())


def premiums(tokenizer: Tokenizer) -> dict[str, float]:
    # On lines neither trained on: tokens of each language over English's for the same content.
    held_out = {language: (FLORES / f"{language}.txt").read_text().splitlines()[-150:] for language in LANGUAGES}
    tokens = {language: sum(len(e.ids) for e in tokenizer.encode_batch(lines)) for language, lines in held_out.items()}
    return {language: tokens[language] / tokens["eng_Latn"] for language in LANGUAGES}


def test_parity_narrows_the_language_gap_at_the_same_vocabulary_size(sessionmaker, store, parallel):
    team, corpora = parallel
    plain = trained(sessionmaker, store, team, corpora, SPEC)
    parity = trained(sessionmaker, store, team, corpora, {**SPEC, "parity": True, "parity_dev_lines": 200})
    assert parity.get_vocab_size() == plain.get_vocab_size() == 1500
    assert parity.token_to_id("<|endoftext|>") == 0
    plain_gap, parity_gap = premiums(plain), premiums(parity)
    worst = max(LANGUAGES[1:], key=plain_gap.get)
    assert parity_gap[worst] < plain_gap[worst], (plain_gap, parity_gap)
    assert max(parity_gap.values()) - min(parity_gap.values()) < max(plain_gap.values()) - min(plain_gap.values())


def test_parity_needs_one_parallel_group_in_two_languages(sessionmaker, store, parallel):
    team, corpora = parallel
    with transaction(sessionmaker) as session, pytest.raises(InvalidInput) as refused:
        submit_job(session, team, "t", {**SPEC, "parity": True}, [str(corpora["eng_Latn"].id)], [])
    assert refused.value.field == "train_corpora"
    with transaction(sessionmaker) as session, pytest.raises(InvalidInput) as refused:
        submit_job(session, team, "t", {**SPEC, "parity": True, "algorithm": "unigram"},
                   [str(c.id) for c in corpora.values()], [])
    assert refused.value.field == "spec.parity"
