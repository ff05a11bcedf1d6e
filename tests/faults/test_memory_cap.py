"""A job past the worker's memory cap fails with that reason, and its process ends at once
(before the kernel's OOM killer would pick a process of its own choosing)."""

import subprocess
import sys
import time

from sqlalchemy import select

from tests.faults.conftest import record, unique
from tests.faults.test_faults import BIBLE, upload
from tests.stack import process_env
from tokenmill.db import transaction
from tokenmill.jobs import submit_job
from tokenmill.models import Team, TrainingJob

CAP = 300 * 2**20
RUN_ONE_JOB = """
import sys, uuid
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.lifecycle import WorkLimits
from tokenmill.pipeline import run_training_job
from tokenmill.settings import get_settings
from tokenmill.store import open_store
settings = get_settings()
factory = make_sessionmaker(make_engine(settings.database_url))
store = open_store(settings.storage_url, settings.s3_endpoint_url)
print(run_training_job(factory, store, uuid.UUID(sys.argv[1]), WorkLimits(max_memory=int(sys.argv[2]))))
"""


def test_a_job_over_the_memory_cap_fails_with_that_reason(settings, sessionmaker, faults_http, team_key):
    corpus_id = upload(faults_http, BIBLE)
    with transaction(sessionmaker) as session:
        team = session.get_one(Team, team_key[0].id)
        # Not sent to the stack's worker: this test runs the job in a process of its own.
        job, _ = submit_job(session, team, unique("greedy"), {"vocab_size": 30000}, [corpus_id], [corpus_id])
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", RUN_ONE_JOB, str(job.id), str(CAP)], env=process_env(settings, 0),
                          capture_output=True, text=True, timeout=300)
    with sessionmaker() as session:
        row = session.scalar(select(TrainingJob).where(TrainingJob.id == job.id))
    record(f"a job over a {CAP >> 20} MiB memory cap", f"{row.status}; worker process exit {done.returncode}",
           time.monotonic() - started)
    assert done.returncode == 70, done.stdout + done.stderr[-3000:]
    assert row.status == "failed" and "more than 0.3 GiB of memory" in row.error, row.error
