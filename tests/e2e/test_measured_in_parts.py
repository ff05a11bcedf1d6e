"""A whole-corpus evaluation on real workers: an evaluation run sends helper tasks on the broker,
both worker processes measure parts of the corpus, and the run stores the metrics of one pass."""

import random
import re

import pytest

from service.queue import Queue
from tests.services import REDIS_DB_BASE
from tests.stack import own_worker, unique
from tests.waiting import UNFINISHED, until
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.evaluation.encoders import encoding_threads, reference_encoder
from tokenmill.evaluation.measuring import measure_corpus
from tokenmill.evaluation.submission import submit_run
from tokenmill.models import Evaluation, EvaluationRun
from tokenmill.settings import Settings
from tokenmill.teams import create_team

REDIS_DB = REDIS_DB_BASE + 6
PART_BYTES = 512 * 1024


@pytest.fixture
def measuring_workers(settings, tmp_path):
    """One worker, two processes, measuring a corpus whole in 512 KiB parts."""
    log_path = tmp_path / "worker.log"
    with own_worker(settings, REDIS_DB, log_path, 2, TOKENMILL_EVALUATION_PART_BYTES=str(PART_BYTES),
                    TOKENMILL_EVALUATION_HELPERS="2", TOKENMILL_EVALUATION_THREADS="1") as broker_url:
        yield Settings(broker_url=broker_url), log_path


def _lines(total: int):
    words = ["the", "measure", "of", "a", "corpus", "día", "niño", "日本語", "добрый", "return", "def", "(x)", "2026"]
    rng = random.Random(11)
    text = "".join(" ".join(rng.choice(words) for _ in range(rng.randrange(1, 40))) + "\n" for _ in range(total // 60))
    return [text.encode()]


def test_a_corpus_is_measured_whole_by_several_worker_processes(settings, sessionmaker, store, measuring_workers):
    worker_settings, log_path = measuring_workers
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, unique("measured"))
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("whole", "news", "eng_Latn"), _lines(6 * 2**20),
                           max_bytes=10**9, max_line_bytes=10**6)
    parts = -(-corpus.bytes // PART_BYTES)
    assert parts >= 8
    with transaction(sessionmaker) as session:
        run = submit_run(session, team, None, None, "cl100k_base", [str(corpus.id)])
    assert Queue(worker_settings).send_evaluation(run.id)
    row = until(lambda: _run(sessionmaker, run.id), lambda r: r.status not in UNFINISHED, timeout=300)
    assert row.status == "succeeded", row.error
    with sessionmaker() as session:
        [measured] = session.query(Evaluation).filter(Evaluation.run_id == run.id).all()
    with encoding_threads():
        expected = measure_corpus(reference_encoder("cl100k_base"), store, corpus)
    for key in ("tokens", "words", "characters", "bytes", "documents", "token_counts"):
        assert measured.metrics.get(key) == expected.get(key), key
    assert measured.metrics["fertility"] == pytest.approx(expected["fertility"], rel=1e-12)
    assert measured.metrics["fertility_ci95"] == pytest.approx(expected["fertility_ci95"], rel=1e-9)
    log = log_path.read_text(errors="replace")
    measurers = set(re.findall(r"(ForkPoolWorker-\d+).*measured part \d+ of evaluation run " + str(run.id), log))
    numbers = re.findall(r"measured part (\d+) of evaluation run " + str(run.id), log)
    assert sorted(map(int, numbers)) == list(range(parts)), log[-3000:]  # each part once
    assert len(measurers) == 2, log[-3000:]


def _run(sessionmaker, run_id) -> EvaluationRun:
    with sessionmaker() as session:
        return session.get_one(EvaluationRun, run_id)
