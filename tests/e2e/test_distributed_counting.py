"""Distributed counting on real workers: a corpus larger than a worker's memory cap is counted in
parts by several worker processes (helper tasks on the broker) and trains within the cap."""

import json
import random
import re

import pytest
from sqlalchemy import select

from service.queue import Queue
from tests.services import REDIS_DB_BASE
from tests.stack import own_worker, unique
from tests.waiting import UNFINISHED, until
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.jobs.submission import submit_job
from tokenmill.models import TokenizerVersion, TrainingJob
from tokenmill.settings import Settings
from tokenmill.teams import create_team

REDIS_DB = REDIS_DB_BASE + 3
CAP = 300 * 2**20
CORPUS_BYTES = 320 * 2**20


@pytest.fixture
def capped_workers(settings, tmp_path):
    """One worker, two processes, each capped at CAP, counting 16 MiB parts."""
    log_path = tmp_path / "worker.log"
    with own_worker(settings, REDIS_DB, log_path, 2, TOKENMILL_JOB_MAX_MEMORY_BYTES=str(CAP),
                    TOKENMILL_COUNT_PART_BYTES=str(16 * 2**20), TOKENMILL_COUNT_HELPERS="4") as broker_url:
        yield Settings(broker_url=broker_url), log_path


def _corpus_chunks(total: int):
    # Real-looking lines of many words and numbers, 4 MiB at a time, each block different.
    words = ["the", "counts", "of", "pieces", "merge", "tokenmill", "día", "niño", "日本語", "добрый", "return",
             "def", "(x)", "lower", "lowest", "newer", "wider", "2026", "—", "!!"]
    rng = random.Random(7)
    sent = 0
    while sent < total:
        block = "".join(" ".join(rng.choice(words) for _ in range(rng.randrange(3, 30))) + f" {rng.randrange(10**4)}\n"
                        for _ in range(40_000)).encode()
        yield block
        sent += len(block)


def test_a_corpus_larger_than_a_workers_memory_is_counted_by_several_workers(settings, sessionmaker, store,
                                                                          capped_workers):
    worker_settings, log_path = capped_workers
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("wide"))
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("big", "news", "eng_Latn"),
                           _corpus_chunks(CORPUS_BYTES), max_bytes=10**10, max_line_bytes=10**6)
    assert corpus.bytes > 300 * 2**20
    # Training only (no evaluation corpora): the cap is on what counting and learning hold.
    job_id, version = _trained(sessionmaker, worker_settings, team, corpus,
                               {"library": "rustbpe", "vocab_size": 2000, "counting": "distributed"})
    assert version.vocab_size == 2000
    assert version.peak_memory_bytes < CAP
    log = log_path.read_text(errors="replace")
    counters = set(re.findall(r"(ForkPoolWorker-\d+).*counted part \d+ of job " + str(job_id), log))
    parts = re.findall(r"counted part (\d+) of job " + str(job_id), log)
    assert len(parts) == -(-corpus.bytes // (16 * 2**20)) and len(set(parts)) == len(parts)
    assert len(counters) == 2, log[-3000:]


def test_superword_stages_are_counted_in_parts_by_several_workers(settings, sessionmaker, store, capped_workers):
    # SuperBPE with `counting: distributed`: every part is counted once, by any worker process,
    # into both stages' spills; the version's files split by the spans' regex in every library.
    import base64

    import tiktoken
    from tokenizers import Tokenizer

    worker_settings, log_path = capped_workers
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("superwide"))
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("spans", "news", "eng_Latn"),
                           _corpus_chunks(40 * 2**20), max_bytes=10**10, max_line_bytes=10**6)
    job_id, version = _trained(sessionmaker, worker_settings, team, corpus, {
        "library": "tokenmill", "vocab_size": 2000, "counting": "distributed", "superword": {"transition_vocab_size": 1500}})
    superword = version.lineage["superword"]
    assert version.vocab_size == 2000 and superword["merges_added"] == 500, superword
    files = {entry["name"]: store.get_bytes(entry["key"]) for entry in version.files}
    manifest = json.loads(files["manifest.json"])["tiktoken"]
    ranks = {base64.b64decode(token): int(rank) for token, rank in
             (line.split() for line in files["tokenizer.tiktoken"].splitlines())}
    assert any(b" " in token.strip(b" ") for token, rank in ranks.items() if rank >= 1500)
    encoding = tiktoken.Encoding("superwide", pat_str=manifest["pat_str"], mergeable_ranks=ranks,
                                 special_tokens=manifest["special_tokens"])
    text = next(_corpus_chunks(1)).decode()[:5000]
    assert Tokenizer.from_str(files["tokenizer.json"].decode()).encode(text).ids == encoding.encode(text)
    log = log_path.read_text(errors="replace")
    counters = set(re.findall(r"(ForkPoolWorker-\d+).*counted part \d+ of job " + str(job_id), log))
    assert len(counters) == 2, log[-3000:]


def _trained(sessionmaker, worker_settings, team, corpus, spec) -> tuple:
    """The job's id and its version, once the capped workers trained it on the corpus."""
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, unique("wide"), spec, [str(corpus.id)], [])
    assert Queue(worker_settings).send_training(job.id)
    row = until(lambda: _row(sessionmaker, job.id), lambda r: r.status not in UNFINISHED, timeout=400)
    assert row.status == "succeeded", row.error
    with sessionmaker() as session:
        return job.id, session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id)).one()


def _row(sessionmaker, job_id) -> TrainingJob:
    with sessionmaker() as session:
        return session.get_one(TrainingJob, job_id)
