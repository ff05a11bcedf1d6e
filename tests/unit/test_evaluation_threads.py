"""Evaluation's threads: one setting decides them, and none outlives an evaluation."""

import json
import os
import threading
import uuid

import pytest

import tokenmill.evaluation.encoders as encoders
import tokenmill.evaluation.measuring as evaluation
from tests.text import flores_lines as lines
from tokenmill.evaluation.metrics import MetricsAccumulator
from tokenmill.models import Corpus
from tokenmill.settings import Settings, get_settings
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents


@pytest.fixture(scope="module")
def bytebpe_files():
    spec = resolve_spec({"vocab_size": 2000})
    return version_contents(spec, with_tokenizers.train(spec, lines(200)), {}, {})


@pytest.fixture
def threads(monkeypatch):
    """Set the evaluation_threads setting for the test."""
    return lambda count: monkeypatch.setattr(get_settings(), "evaluation_threads", count)


@pytest.fixture
def corpora(monkeypatch):
    """Two corpora read from memory instead of the store."""
    texts = {"a": lines(150, languages=("eng_Latn", "spa_Latn")), "b": lines(150, offset=300, languages=("zho_Hans",))}
    monkeypatch.setattr(evaluation, "corpus_documents", lambda store, corpus: iter(texts[corpus.name]))
    return [Corpus(id=uuid.uuid4(), name=name) for name in texts]


def live_threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def test_the_setting_is_read_from_the_environment_and_defaults_to_the_cores(monkeypatch):
    monkeypatch.delenv("TOKENMILL_EVALUATION_THREADS", raising=False)
    assert Settings().evaluation_threads == (os.cpu_count() or 1)
    monkeypatch.setenv("TOKENMILL_EVALUATION_THREADS", "3")
    assert Settings().evaluation_threads == 3
    monkeypatch.setenv("TOKENMILL_EVALUATION_THREADS", "0")
    with pytest.raises(ValueError):
        Settings()


@pytest.mark.slow
def test_no_thread_outlives_an_evaluation(bytebpe_files, corpora, threads):
    threads(2)
    encoders.reference_encoder.cache_clear()  # cached encoders once kept a pool of threads each
    before = live_threads()
    text = lines(100)
    for name in ("gpt2", "o200k_base"):
        evaluation.measure(encoders.reference_encoder(name), text)
    assert live_threads() == before
    results = evaluation.evaluate_version(None, "v", bytebpe_files, corpora, lambda _: None)
    assert {metrics["encoded_by"] for _, metrics in results} == {"tiktoken"}  # threads were used: tiktoken's slices
    assert live_threads() == before


def test_threads_are_started_and_ended_by_the_outermost_context(threads):
    threads(3)
    before = live_threads()
    encoder = encoders.reference_encoder("cl100k_base")
    with encoders.encoding_threads():
        pool = encoders._Threads.slices
        assert pool is not None and pool._max_workers == 3
        with encoders.encoding_threads():
            assert encoders._Threads.slices is pool  # nested: shared
        assert encoders._Threads.slices is pool
        encoder.encode(lines(100))
        assert live_threads() > before
    assert encoders._Threads.slices is None and live_threads() == before


def test_one_evaluation_thread_means_no_thread_and_no_process(threads, monkeypatch):
    threads(1)
    monkeypatch.setattr(evaluation, "SHARD_AFTER", 1)
    monkeypatch.setattr(evaluation, "BATCH_LINES", 16)
    import tokenmill.evaluation.shards as shards

    def no_processes(*args):
        raise AssertionError("measured in processes")

    monkeypatch.setattr(shards, "measure_in_processes", no_processes)
    encoder = encoders.reference_encoder("gpt2")
    with encoders.encoding_threads():
        assert encoders._Threads.slices is None
        evaluation.measure(encoder, lines(80))


def test_the_setting_is_the_number_of_measuring_processes(threads, monkeypatch):
    threads(3)
    monkeypatch.setattr(evaluation, "SHARD_AFTER", 1)
    monkeypatch.setattr(evaluation, "BATCH_LINES", 16)
    import tokenmill.evaluation.shards as shards

    asked = []
    monkeypatch.setattr(shards, "measure_in_processes", lambda encoder, batches, processes: asked.append(processes) or MetricsAccumulator(0))
    evaluation.measure(encoders.reference_encoder("gpt2"), lines(80))
    assert asked == [3]


def test_tokenizers_encodes_on_one_thread_line_by_line_with_the_same_ids(bytebpe_files, threads, monkeypatch):
    slow, _ = encoders.version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    text = lines(40)
    threads(2)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    batched = slow.encode(text), evaluation.measure(slow, text)
    threads(1)
    calls = []
    real = slow.tokenizer

    class Spy:
        def __getattr__(self, name):
            calls.append(name)
            return getattr(real, name)

    monkeypatch.setattr(slow, "tokenizer", Spy())
    assert (slow.encode(text), evaluation.measure(slow, text)) == batched
    assert "encode" in calls and "encode_batch" not in calls and "encode_batch_fast" not in calls
    calls.clear()
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")  # the batch encode is serial already
    slow.encode(text)
    assert calls == ["encode_batch"]


def test_no_corpora_no_encoder(bytebpe_files, monkeypatch):
    def built(*args):
        raise AssertionError("an encoder was built")

    monkeypatch.setattr(evaluation, "version_encoders", built)
    progress = []
    assert evaluation.evaluate_version(None, "v", bytebpe_files, [], progress.append) == []
