"""The fair pick on real PostgreSQL: teams take turns, no team runs past its running quota, and
concurrent claimers never take one row twice (nor a team past its quota between them).

A database of its own: a worker's pick takes any team's queued rows, and other tests leave some.
"""

import threading
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tests import services
from tests.stack import settle_left_work
from tokenmill.db import make_engine, make_sessionmaker, transaction, utcnow
from tokenmill.models import Corpus, EvaluationRun, Status, TrainingJob
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.scheduling import EVALUATION, STATISTICS, TRAINING, claim_next
from tokenmill.quotas import set_quotas
from tokenmill.teams import create_team

ROOMY = WorkLimits(running_jobs=100)


@pytest.fixture(scope="module")
def database_url():
    with services.postgres_database() as url:
        yield url


@pytest.fixture
def factory(database_url):
    engine = make_engine(database_url)
    yield make_sessionmaker(engine)
    engine.dispose()
    settle_left_work(database_url)  # each test starts with nothing queued


def teams(factory, count: int) -> list[uuid.UUID]:
    with transaction(factory) as session:
        return [create_team(session, f"fair-{uuid.uuid4().hex[:8]}")[0].id for _ in range(count)]


def queue_jobs(factory, owners: list[uuid.UUID], model=TrainingJob) -> list[uuid.UUID]:
    """One queued row per owner, in this order of submission."""
    start = utcnow() - timedelta(hours=1)
    with transaction(factory) as session:
        rows = [model(team_id=team, created_at=start + timedelta(seconds=i), corpus_ids=[]) if model is EvaluationRun
                else model(team_id=team, tokenizer="t", spec={}, train_corpus_ids=[], eval_corpus_ids=[],
                           created_at=start + timedelta(seconds=i))
                for i, team in enumerate(owners)]
        session.add_all(rows)
    return [row.id for row in rows]


def finish(factory, row_id, model=TrainingJob) -> None:
    with transaction(factory) as session:
        session.execute(update(model).where(model.id == row_id).values(status=Status.SUCCEEDED))


def test_claims_go_round_robin_over_teams_oldest_first_within_a_team(factory):
    a, b, c = teams(factory, 3)
    rows = queue_jobs(factory, [a, a, a, a, b, c, b, a, c, b])
    order = [claim_next(factory, TRAINING, ROOMY).row_id for _ in rows]
    assert claim_next(factory, TRAINING, ROOMY) is None
    a1, a2, a3, a4, b1, c1, b2, a5, c2, b3 = rows
    assert order == [a1, b1, c1, a2, b2, c2, a3, b3, a4, a5]


def test_a_team_never_runs_more_than_its_running_quota_evaluations_counted_apart(factory):
    team, other = teams(factory, 2)
    jobs = queue_jobs(factory, [team] * 4)
    limits = WorkLimits(running_jobs=2)
    assert [claim_next(factory, TRAINING, limits).row_id for _ in range(2)] == jobs[:2]
    assert claim_next(factory, TRAINING, limits) is None  # at its quota: the rest wait queued
    (run,) = queue_jobs(factory, [team], EvaluationRun)
    assert claim_next(factory, EVALUATION, limits).row_id == run  # evaluation runs have their own count
    later = queue_jobs(factory, [other])
    assert claim_next(factory, TRAINING, limits).row_id == later[0]  # another team is not held up
    finish(factory, jobs[0])
    assert claim_next(factory, TRAINING, limits).row_id == jobs[2]  # a slot of its own came free
    with transaction(factory) as session:
        set_quotas(session, team, {"running_jobs": 3})  # the operator's figure wins over the default
    assert claim_next(factory, TRAINING, limits).row_id == jobs[3]


def test_statistics_take_turns_too(factory):
    a, b = teams(factory, 2)
    start = utcnow() - timedelta(hours=1)
    with transaction(factory) as session:
        corpora = [Corpus(team_id=team, name="c", domain="d", language="l", format="text", storage_key="k",
                          sha256="0" * 64, bytes=1, lines=1, words=1, characters=1, created_at=start + timedelta(seconds=i))
                   for i, team in enumerate([a, a, a, b])]
        session.add_all(corpora)
    order = [claim_next(factory, STATISTICS, ROOMY).row_id for _ in range(3)]
    assert order == [corpora[0].id, corpora[3].id, corpora[1].id]
    assert claim_next(factory, STATISTICS, WorkLimits(running_jobs=2)) is None  # a's two claims are live


def test_concurrent_claimers_take_each_row_once_and_keep_to_the_quota(factory):
    crowded, quiet = teams(factory, 2)
    queue_jobs(factory, [crowded] * 12 + [quiet] * 12)
    with transaction(factory) as session:
        set_quotas(session, crowded, {"running_jobs": 3})
    claims: list = []
    start = threading.Barrier(16)

    def claimer() -> None:
        start.wait()
        while (claimed := claim_next(factory, TRAINING, WorkLimits(running_jobs=5))) is not None:
            claims.append(claimed.row_id)

    threads = [threading.Thread(target=claimer) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(claims) == len(set(claims)) == 3 + 5
    with factory() as session:
        owners = list(session.scalars(select(TrainingJob.team_id).where(TrainingJob.id.in_(claims))))
    assert (owners.count(crowded), owners.count(quiet)) == (3, 5)


def test_a_row_queued_again_after_a_transient_fault_waits_until_it_is_due(factory):
    (team,) = teams(factory, 1)
    (row,) = queue_jobs(factory, [team])

    def due_in(seconds: float) -> None:
        with transaction(factory) as session:
            session.execute(update(TrainingJob).where(TrainingJob.id == row)
                            .values(retry_at=utcnow() + timedelta(seconds=seconds)))

    due_in(3600)  # its own retry message comes then: other messages leave it
    assert claim_next(factory, TRAINING, ROOMY) is None
    due_in(-1)
    assert claim_next(factory, TRAINING, ROOMY).row_id == row
