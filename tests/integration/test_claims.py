"""One claim for every kind of queued work, on real PostgreSQL: a training job, an evaluation run,
a corpus's statistics and a count part are claimed, beaten on, taken over and fenced alike."""

import uuid

import pytest

from tokenmill.db import transaction
from tokenmill.models import Corpus, EvaluationRun, Status, TrainingJob
from tokenmill.queued_work.claims import (
    CORPUS_STATISTICS,
    COUNT_PARTS,
    JOB_MEASURE_PARTS,
    JOBS,
    MEASURE_PARTS,
    RUNS,
    Claims,
    beat,
    claim_row,
    kept,
)
from tokenmill.teams import create_team

LIVE = 120.0  # silent_after: every claim made in a test is live
DEAD = -60.0  # silent_after: every claim is already silent (its worker taken for dead)


def _corpus(team_id: uuid.UUID) -> Corpus:
    return Corpus(team_id=team_id, name="c", domain="d", language="l", format="text", storage_key="k",
                  sha256="0" * 64, bytes=1, lines=1, words=1, characters=1)


def _job(team_id: uuid.UUID) -> TrainingJob:
    return TrainingJob(team_id=team_id, tokenizer="t", spec={}, train_corpus_ids=[], eval_corpus_ids=[])


def waiting_row(session, claims: Claims):
    """A row of this kind waiting for its first claim, and the condition that selects it."""
    team = create_team(session, f"claims-{uuid.uuid4().hex[:8]}")[0]
    if claims in (COUNT_PARTS, MEASURE_PARTS, JOB_MEASURE_PARTS):
        owner = EvaluationRun(team_id=team.id, corpus_ids=[]) if claims is MEASURE_PARTS else _job(team.id)
        corpus = _corpus(team.id)
        session.add_all([owner, corpus])
        session.flush()
        model = claims.model
        session.add(model(owner_id=owner.id, attempt=1, part=0, corpus_id=corpus.id, start=0, end=1,
                          status=Status.QUEUED.value, claims=0))
        return (model.owner_id == owner.id) & (model.attempt == 1) & (model.part == 0)
    row = {JOBS: _job, RUNS: lambda team_id: EvaluationRun(team_id=team_id, corpus_ids=[]),
           CORPUS_STATISTICS: _corpus}[claims](team.id)
    session.add(row)
    session.flush()
    return claims.model.id == row.id


@pytest.fixture(params=[JOBS, RUNS, CORPUS_STATISTICS, COUNT_PARTS, MEASURE_PARTS, JOB_MEASURE_PARTS], ids=lambda claims: claims.name)
def kind(request, sessionmaker):
    with transaction(sessionmaker) as session:
        row = waiting_row(session, request.param)
    return request.param, row


def test_a_waiting_row_is_claimed_once_while_its_claim_is_live(sessionmaker, kind):
    claims, row = kind
    assert claim_row(sessionmaker, claims, row, LIVE, silent_only=True) is None  # nothing to take over yet
    assert claim_row(sessionmaker, claims, row, LIVE, "task-1") == 1
    assert claim_row(sessionmaker, claims, row, LIVE, "task-2") is None
    assert claim_row(sessionmaker, claims, row, LIVE, "task-2", silent_only=True) is None


def test_a_silent_claim_is_taken_over_and_the_old_attempt_is_fenced_out(sessionmaker, kind):
    claims, row = kind
    assert claim_row(sessionmaker, claims, row, LIVE) == 1
    with transaction(sessionmaker) as session:
        assert beat(session, claims, row, 1) and kept(session, claims, row, 1)
        assert not beat(session, claims, row, 2)  # no such attempt
    assert claim_row(sessionmaker, claims, row, DEAD, silent_only=True) == 2
    with transaction(sessionmaker) as session:
        assert not beat(session, claims, row, 1) and not kept(session, claims, row, 1)  # the old worker has lost it
        assert beat(session, claims, row, 2) and kept(session, claims, row, 2)
    assert claim_row(sessionmaker, claims, row, DEAD) == 3  # every claim counts, for the attempts allowed
