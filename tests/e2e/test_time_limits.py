"""A job past its time limit fails with that reason, leaves no version and no files; a corpus's
statistics past it fail with theirs."""

import subprocess
import sys
import uuid

import pytest
import redis
from sqlalchemy import select

from service.queue import Queue
from tests.services import FIXTURES, REDIS_DB_BASE
from tests.stack import process_env, settle_left_work
from tests.waiting import UNFINISHED, until
from tokenmill.corpora import statistics_runs
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Corpus, TokenizerVersion, TrainingJob
from tokenmill.queued_work.lifecycle import TIME_LIMIT
from tokenmill.settings import Settings
from tokenmill.teams import create_team

REDIS_DB = REDIS_DB_BASE + 1


@pytest.fixture
def impatient_worker(settings, tmp_path):
    """A worker with a 1 s soft and 2 s hard limit, on its own Redis database."""
    redis.Redis.from_url(settings.broker_url.rsplit("/", 1)[0] + f"/{REDIS_DB}").flushdb()
    settle_left_work(settings.database_url)  # its message starts any team's queued work, in turn
    env = process_env(settings, REDIS_DB)
    env.update({"TOKENMILL_JOB_SOFT_TIME_LIMIT": "1", "TOKENMILL_JOB_HARD_TIME_LIMIT": "2"})
    log = open(tmp_path / "worker.log", "wb")
    worker = subprocess.Popen([sys.executable, "-m", "tokenmill", "worker"], env=env, stdout=log, stderr=subprocess.STDOUT)
    yield Settings(broker_url=env["TOKENMILL_BROKER_URL"])
    worker.terminate()
    worker.wait(30)
    log.close()


def test_slow_training_is_failed_with_the_time_limit(sessionmaker, store, impatient_worker):
    text = b"".join(b"".join((FIXTURES / "parallel_flores200_dev" / f"{lang}.txt").open("rb").readlines()[:500])
                    for lang in ("eng_Latn", "zho_Hans", "arb_Arab", "hin_Deva", "rus_Cyrl", "spa_Latn"))
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"slow-{uuid.uuid4().hex[:8]}")
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("slow", "news", "mul"), [text],
                           max_bytes=10**9, max_line_bytes=10**6)
    with transaction(sessionmaker) as session:
        # Unigram's EM on this corpus takes well over two seconds.
        job, _ = submit_job(session, team, "slow", {"algorithm": "unigram", "vocab_size": 6000},
                            [str(corpus.id)], [str(corpus.id)])
    queue = Queue(impatient_worker)
    queue.send_training(job.id)
    def read_row() -> TrainingJob:
        with sessionmaker() as session:
            return session.get_one(TrainingJob, job.id)

    row = until(read_row, lambda row: row.status not in UNFINISHED, 90)
    queue.close()
    assert (row.status, row.error) == ("failed", TIME_LIMIT)
    with sessionmaker() as session:
        assert session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id)).all() == []
    prefix = f"{store.prefix}/versions/{team.id}/{job.id}"
    assert store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix).get("KeyCount", 0) == 0


def test_statistics_past_the_time_limit_fail_with_that_reason(sessionmaker, store, impatient_worker):
    # 4 million one-letter lines: seconds of counting, well past the 1 s limit.
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"lines-{uuid.uuid4().hex[:8]}")
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("lines", "code", "eng_Latn"), [b"a\n" * 4_000_000],
                           max_bytes=10**9, max_line_bytes=10**6)
    queue = Queue(impatient_worker)
    queue.send_statistics(corpus.id)

    def read_row() -> Corpus:
        with sessionmaker() as session:
            return session.get_one(Corpus, corpus.id)

    row = until(read_row, lambda row: row.statistics is not None or row.statistics_error is not None, 90)
    queue.close()
    assert (row.statistics, row.statistics_error) == (None, statistics_runs.TIME_LIMIT)
