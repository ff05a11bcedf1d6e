"""A corpus's statistics are bounded in memory like a job: past the worker's cap they fail with
that reason and the process ends at once (exit 70), as a job's does (test_memory_cap.py)."""

import subprocess
import sys

from tests.stack import process_env, unique
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.corpora.statistics_runs import MEMORY_ADVICE
from tokenmill.db import transaction
from tokenmill.models import Corpus
from tokenmill.teams import create_team

CAP = 200 * 2**20
RECORD_STATISTICS = """
import sys, uuid
from tokenmill.corpora.statistics_runs import record_statistics
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.settings import get_settings
from tokenmill.store import open_store
from tokenmill.queued_work.limits import WorkLimits
settings = get_settings()
factory = make_sessionmaker(make_engine(settings.database_url))
store = open_store(settings.storage_url, settings.s3_endpoint_url)
print(record_statistics(factory, store, uuid.UUID(sys.argv[1]), WorkLimits(max_memory=int(sys.argv[2]))))
"""


def test_statistics_over_the_memory_cap_fail_with_that_reason(settings, sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("words"))
    # Four million distinct words: one counter entry each, far past the cap (two million came close).
    text = "".join(f"w{i} x{i} \n" for i in range(2_000_000)).encode()
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("words", "code", "eng_Latn"), [text],
                           max_bytes=10**9, max_line_bytes=10**6)
    done = subprocess.run([sys.executable, "-c", RECORD_STATISTICS, str(corpus.id), str(CAP)],
                          env=process_env(settings, 0), capture_output=True, text=True, timeout=300)
    with sessionmaker() as session:
        row = session.get_one(Corpus, corpus.id)
    assert done.returncode == 70, done.stdout + done.stderr[-3000:]
    assert row.statistics is None and row.statistics_error.endswith(MEMORY_ADVICE), row.statistics_error
    assert "more than 0.2 GiB of memory" in row.statistics_error
