"""A job past the worker's memory cap fails with that reason, and its process ends at once
(before the kernel's OOM killer would pick a process of its own choosing)."""

import subprocess
import sys

from sqlalchemy import select

from tests.services import CORPORA
from tests.stack import process_env, unique
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.jobs.submission import submit_job
from tokenmill.models import TrainingJob
from tokenmill.teams import create_team

CAP = 300 * 2**20
RUN_ONE_JOB = """
import sys, uuid
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.jobs.pipeline import run_training_job
from tokenmill.settings import get_settings
from tokenmill.store import open_store
settings = get_settings()
factory = make_sessionmaker(make_engine(settings.database_url))
store = open_store(settings.storage_url, settings.s3_endpoint_url)
print(run_training_job(factory, store, uuid.UUID(sys.argv[1]), WorkLimits(max_memory=int(sys.argv[2]))))
"""


def test_a_job_over_the_memory_cap_fails_with_that_reason(settings, sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("greedy"))
    with (CORPORA / "bible" / "eng_Latn.txt").open("rb") as handle:
        corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("bible", "religion", "eng_Latn"), handle,
                               max_bytes=10**9, max_line_bytes=10**6)
    with transaction(sessionmaker) as session:
        # Never sent to a worker (and no sweeper runs here): the job runs in a process of its own.
        job, _ = submit_job(session, team, unique("greedy"), {"vocab_size": 30000}, [str(corpus.id)], [str(corpus.id)])
    done = subprocess.run([sys.executable, "-c", RUN_ONE_JOB, str(job.id), str(CAP)], env=process_env(settings, 0),
                          capture_output=True, text=True, timeout=300)
    with sessionmaker() as session:
        row = session.scalar(select(TrainingJob).where(TrainingJob.id == job.id))
    assert done.returncode == 70, done.stdout + done.stderr[-3000:]
    assert row.status == "failed" and "more than 0.3 GiB of memory" in row.error, row.error
