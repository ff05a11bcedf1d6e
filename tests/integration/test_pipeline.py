"""The worker side without Celery: claiming, failing cleanly, cancelling, sweeping."""

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction, utcnow
from tokenmill.errors import JobCancelled, TransientError
from tokenmill.jobs.pipeline import job_prefix, run_training_job
from tokenmill.jobs.submission import cancel_job, submit_job
from tokenmill.jobs.sweeper import Senders, sweep
from tokenmill.models import TokenizerVersion, TrainingJob
from tokenmill.queued_work.lifecycle import WORKER_DIED, Claim, claim
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.settings import Settings
from tokenmill.store import ObjectNotFound
from tokenmill.teams import create_team


@pytest.fixture
def team_and_corpus(sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"pipe-{uuid.uuid4().hex[:8]}")
    text = "".join(f"line {i} of some training text, words and more words\n" for i in range(300)).encode()
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("c", "news", "eng_Latn"), [text],
                           max_bytes=10**9, max_line_bytes=10**6)
    return team, corpus


def new_job(sessionmaker, team, corpus, spec=None) -> uuid.UUID:
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, "pipe", spec or {"vocab_size": 400}, [str(corpus.id)], None)
    return job.id


def job_row(sessionmaker, job_id) -> TrainingJob:
    with sessionmaker() as session:
        return session.get_one(TrainingJob, job_id)


def test_duplicate_delivery_does_nothing(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    assert run_training_job(sessionmaker, store, job_id) == "succeeded"
    assert run_training_job(sessionmaker, store, job_id) == "skipped"
    assert claim(sessionmaker, TrainingJob, job_id, WorkLimits()) is Claim.SKIPPED
    with sessionmaker() as session:
        versions = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job_id)).all()
    assert len(versions) == 1 and job_row(sessionmaker, job_id).attempts == 1
    for entry in versions[0].files:
        assert len(store.get_bytes(entry["key"])) == entry["bytes"]


def test_training_error_fails_the_job_and_leaves_no_version_or_files(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    # Unigram cannot fit this alphabet in 10 tokens: the library refuses while training.
    job_id = new_job(sessionmaker, team, corpus, {"algorithm": "unigram", "vocab_size": 10})
    assert run_training_job(sessionmaker, store, job_id) == "failed"
    job = job_row(sessionmaker, job_id)
    assert job.status == "failed" and "vocabulary" in job.error and job.version is None
    with sessionmaker() as session:
        assert session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job_id)).all() == []
    with pytest.raises(ObjectNotFound):
        store.get_bytes(f"{job_prefix(job)}/tokenizer.json")


def test_cancelled_job_is_not_run(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    with transaction(sessionmaker) as session:
        cancel_job(session, team, job_id)
    assert run_training_job(sessionmaker, store, job_id) == "skipped"
    assert job_row(sessionmaker, job_id).status == "cancelled"


SWEEP = Settings(sweep_queued_after=600, sweep_silent_after=600, job_max_attempts=3)


def test_sweeper_resends_lost_jobs_retries_silent_ones_and_fails_the_exhausted(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    lost, silent, exhausted = (new_job(sessionmaker, team, corpus) for _ in range(3))
    assert claim(sessionmaker, TrainingJob, silent, WorkLimits()) is Claim.CLAIMED
    assert claim(sessionmaker, TrainingJob, exhausted, WorkLimits()) is Claim.CLAIMED
    with transaction(sessionmaker) as session:
        dead_job = session.get_one(TrainingJob, exhausted)
        prefix = job_prefix(dead_job)
        dead_job.attempts = 3
    store.put_bytes(f"{prefix}/tokenizer.json", b"{}")  # what its killed worker had written
    old = utcnow() - timedelta(hours=1)
    with transaction(sessionmaker) as session:
        session.execute(update(TrainingJob).where(TrainingJob.id.in_([lost, silent, exhausted])).values(updated_at=old))
    resent: list[uuid.UUID] = []
    result = sweep(sessionmaker, store, Senders(resent.append, resent.append, lambda _: None), SWEEP)
    assert lost in resent and silent in resent and exhausted not in resent
    assert result["failed"] >= 1 and result["retried"] >= 1
    assert (job_row(sessionmaker, silent).status, job_row(sessionmaker, silent).stage) == ("queued", "retrying")
    assert job_row(sessionmaker, exhausted).status == "failed"
    assert job_row(sessionmaker, exhausted).error == WORKER_DIED.format(attempts=3)
    with pytest.raises(ObjectNotFound):
        store.get_bytes(f"{prefix}/tokenizer.json")
    # Just re-sent: the next sweep leaves them alone.
    again: list[uuid.UUID] = []
    sweep(sessionmaker, store, Senders(again.append, again.append, lambda _: None), SWEEP)
    assert lost not in again and silent not in again


def test_a_silent_job_is_taken_over_by_its_redelivery_and_the_old_attempt_can_no_longer_write(
        sessionmaker, store, team_and_corpus):
    
    from tokenmill.queued_work.progress import Reporter

    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    limits = WorkLimits(silent_after=60)
    assert claim(sessionmaker, TrainingJob, job_id, limits) is Claim.CLAIMED
    assert claim(sessionmaker, TrainingJob, job_id, limits) is Claim.SKIPPED  # alive: a duplicate does nothing
    with transaction(sessionmaker) as session:
        session.execute(update(TrainingJob).where(TrainingJob.id == job_id)
                        .values(updated_at=utcnow() - timedelta(minutes=5)))
    assert run_training_job(sessionmaker, store, job_id, limits) == "succeeded"
    assert job_row(sessionmaker, job_id).attempts == 2
    with pytest.raises(JobCancelled):
        Reporter(sessionmaker, job_id, attempt=1)("training", 0.5, force=True)


def test_progress_never_goes_back_within_an_attempt(sessionmaker, team_and_corpus):
    from tokenmill.queued_work.progress import Reporter

    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    assert claim(sessionmaker, TrainingJob, job_id, WorkLimits()) is Claim.CLAIMED
    report = Reporter(sessionmaker, job_id, attempt=1)
    seen = []
    for stage, progress in [("evaluating", 0.94), ("evaluating references", 0.93), ("registering", 0.95)]:
        report(stage, progress, force=True)
        row = job_row(sessionmaker, job_id)
        seen.append((row.stage, row.progress))
    assert seen == [("evaluating", 0.94), ("evaluating references", 0.94), ("registering", 0.95)]


def test_a_job_whose_attempts_are_used_up_is_failed_at_its_next_claim(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    with transaction(sessionmaker) as session:
        session.execute(update(TrainingJob).where(TrainingJob.id == job_id).values(attempts=3))
    assert run_training_job(sessionmaker, store, job_id, WorkLimits(max_attempts=3)) == "exhausted"
    assert (job_row(sessionmaker, job_id).status, job_row(sessionmaker, job_id).error) == (
        "failed", WORKER_DIED.format(attempts=3))


def test_corpus_statistics_are_recorded_once(sessionmaker, store, team_and_corpus):
    from tokenmill.corpora.statistics_runs import record_statistics
    from tokenmill.models import Corpus

    _, corpus = team_and_corpus
    assert record_statistics(sessionmaker, store, corpus.id, limits=WorkLimits(silent_after=600)) is True
    assert record_statistics(sessionmaker, store, corpus.id, limits=WorkLimits(silent_after=600)) is False
    with sessionmaker() as session:
        statistics = session.get_one(Corpus, corpus.id).statistics
    # 300 lines "line {i} of some training text, words and more words": 10 words each, the numbers unique.
    assert statistics["distinct_words"] == 300 + 8
    assert statistics["hapax_share"] == pytest.approx(300 / 308)
    assert statistics["oov_rate"] == pytest.approx(30 / 300)
    assert len(statistics["zipf_points"]) > 2 and len(statistics["heaps_points"]) > 2


def test_statistics_have_one_worker_at_a_time_and_the_sweeper_waits_for_it(sessionmaker, store, team_and_corpus):
    from tokenmill.corpora.statistics_runs import record_statistics
    from tokenmill.models import Corpus

    _, corpus = team_and_corpus

    def set_corpus(**values) -> None:
        with transaction(sessionmaker) as session:
            session.execute(update(Corpus).where(Corpus.id == corpus.id).values(**values))

    def swept() -> list[uuid.UUID]:
        sent: list[uuid.UUID] = []
        # A claim is dead once silent for an hour (its worker stopped beating).
        sweep(sessionmaker, store, Senders(lambda _: None, lambda _: None, sent.append),
              Settings(sweep_queued_after=600, sweep_silent_after=3600))
        return sent

    hour_ago = utcnow() - timedelta(hours=1)
    set_corpus(created_at=utcnow() - timedelta(hours=2))  # uploaded two hours ago, statistics never begun
    assert corpus.id in swept()  # lost: nobody is on it
    set_corpus(statistics_claimed_at=utcnow() - timedelta(minutes=30))  # a worker began half an hour ago
    assert corpus.id not in swept()
    assert record_statistics(sessionmaker, store, corpus.id, limits=WorkLimits(silent_after=3600)) is False  # a second worker leaves it
    set_corpus(statistics_claimed_at=hour_ago - timedelta(minutes=1))  # that worker died
    assert corpus.id in swept()

    # A failing computation gives its claim back, for the sweeper to send the task again.
    class Broken:
        def __getattr__(self, name):
            raise ConnectionError("the store is away")

    with pytest.raises(ConnectionError):
        record_statistics(sessionmaker, Broken(), corpus.id, limits=WorkLimits(silent_after=3600))
    with sessionmaker() as session:
        assert session.get_one(Corpus, corpus.id).statistics_claimed_at is None
    assert corpus.id in swept()
    assert record_statistics(sessionmaker, store, corpus.id, limits=WorkLimits(silent_after=3600)) is True
    assert corpus.id not in swept()


class FlakyStore:
    """The real store, except that the first `failures` writes of version files fail as if S3 were away."""

    def __init__(self, store, failures: int) -> None:
        self.store, self.failures = store, failures

    def put_bytes(self, key: str, data: bytes) -> None:
        if self.failures:
            self.failures -= 1
            from botocore.exceptions import EndpointConnectionError

            raise EndpointConnectionError(endpoint_url="http://s3.invalid")
        self.store.put_bytes(key, data)

    def __getattr__(self, name):
        return getattr(self.store, name)


def test_a_store_outage_requeues_the_job_then_it_succeeds(sessionmaker, store, team_and_corpus):
    

    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    before = utcnow()
    with pytest.raises(TransientError) as raised:  # due again after retry_seconds × its attempt
        run_training_job(sessionmaker, FlakyStore(store, failures=1), job_id, WorkLimits(retry_seconds=300))
    assert raised.value.retry_in == 300
    job = job_row(sessionmaker, job_id)
    assert (job.status, job.attempts) == ("queued", 1) and job.error.startswith("retrying: the object store was unreachable")
    assert before + timedelta(seconds=300) <= job.retry_at <= utcnow() + timedelta(seconds=300)
    assert run_training_job(sessionmaker, store, job_id) == "succeeded"
    assert job_row(sessionmaker, job_id).attempts == 2


def test_a_store_that_stays_away_fails_the_job_after_the_last_attempt(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    assert run_training_job(sessionmaker, FlakyStore(store, failures=1), job_id, WorkLimits(max_attempts=1)) == "failed"
    assert "gave up after 1 attempts" in job_row(sessionmaker, job_id).error


class Panic(BaseException):
    """Stands for pyo3's PanicException, what a Rust library's panic raises: a BaseException."""


class PanickingStore(FlakyStore):
    """The real store, except that reading a corpus panics, as a library thread might mid-training."""

    def iter_chunks(self, key: str, chunk_size: int = 1 << 20):
        yield from self.store.iter_chunks(key, chunk_size)
        raise Panic("thread '<unnamed>' panicked at 'called `Option::unwrap()` on a `None` value'")


def test_a_library_panic_fails_the_job_with_its_message(sessionmaker, store, team_and_corpus):
    team, corpus = team_and_corpus
    job_id = new_job(sessionmaker, team, corpus)
    assert run_training_job(sessionmaker, PanickingStore(store, failures=0), job_id) == "failed"
    job = job_row(sessionmaker, job_id)
    assert job.status == "failed" and "panicked" in job.error
    assert list(store.list_objects(job_prefix(job))) == []
