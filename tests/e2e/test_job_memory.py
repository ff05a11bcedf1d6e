"""A job's memory is its own (issue 22.2): on one worker process, a small job after a big one
reports the peak the small job has on a fresh worker, not what the big one left behind."""


import pytest
from sqlalchemy import select

from service.queue import Queue
from tests.services import CORPORA, REDIS_DB_BASE
from tests.stack import own_worker, unique
from tests.waiting import UNFINISHED, until
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.jobs.submission import submit_job
from tokenmill.models import TokenizerVersion, TrainingJob
from tokenmill.settings import Settings
from tokenmill.teams import create_team

REDIS_DB = REDIS_DB_BASE + 5
MiB = 2**20
KEEP = 400 * MiB  # what the worker's child may still hold after a task


@pytest.fixture
def one_slot_worker(settings, tmp_path):
    """One worker with one pool process: every job runs in the same child until it is replaced."""
    with own_worker(settings, REDIS_DB, tmp_path / "worker.log", 1, TOKENMILL_WORKER_KEEP_MEMORY_BYTES=str(KEEP)) \
            as broker_url:
        yield Settings(broker_url=broker_url)


def test_a_small_job_after_a_big_one_reports_its_own_peak(settings, sessionmaker, store, one_slot_worker, tmp_path):
    from benchmarks.train_speed import corpus_file

    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("memory"))
    mixed = tmp_path / "mixed.txt"  # code, prose and many languages: distinct words enough for a big job
    corpus_file(mixed, 30 * 10**6)
    big = ingest_corpus(sessionmaker, store, team, CorpusFields("big", "mixed", "mul"), [mixed.read_bytes()],
                        max_bytes=10**9, max_line_bytes=10**6)
    text = (CORPORA / "bible" / "eng_Latn.txt").read_bytes()
    small = ingest_corpus(sessionmaker, store, team, CorpusFields("small", "religion", "eng_Latn"), [text[:200_000]],
                          max_bytes=10**9, max_line_bytes=10**6)

    def peak(corpus, vocab_size: int) -> int:
        with transaction(sessionmaker) as session:
            job, _ = submit_job(session, team, unique("memory"), {"vocab_size": vocab_size}, [str(corpus.id)], [])
        assert Queue(one_slot_worker).send_training(job.id)
        row = until(lambda: _row(sessionmaker, job.id), lambda r: r.status not in UNFINISHED, timeout=300)
        assert row.status == "succeeded", row.error
        with sessionmaker() as session:
            return session.scalars(select(TokenizerVersion.peak_memory_bytes)
                                   .where(TokenizerVersion.job_id == job.id)).one()

    alone = peak(small, 2000)
    heavy = peak(big, 30_000)
    after = peak(small, 2000)
    assert heavy > alone + 150 * MiB, (alone >> 20, heavy >> 20)  # the big job did need more
    assert after < alone + 64 * MiB, (alone >> 20, heavy >> 20, after >> 20)


def _row(sessionmaker, job_id) -> TrainingJob:
    with sessionmaker() as session:
        return session.get_one(TrainingJob, job_id)
