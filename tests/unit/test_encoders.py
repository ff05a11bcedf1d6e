"""Encoders: tiktoken spans and ids agree with tokenizers; truncated curves; the fallback rule."""

import itertools
import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.text import flores_lines as lines
from tokenmill.evaluation.encoders import TokenizersEncoder, proven_encoder, reference_encoder, version_encoders
from tokenmill.evaluation.measuring import curve_sizes, measure, vocab_curve
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents


@pytest.fixture(scope="module")
def bytebpe_files():
    spec = resolve_spec({"vocab_size": 3000})
    return version_contents(spec, with_tokenizers.train(spec, lines()), {}, {})


def test_tiktoken_engine_gives_the_same_metrics_as_tokenizers(bytebpe_files):
    slow, fast = version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    assert fast is not None
    held_out = [*lines(100, offset=500), "tab\tand  spaces", "emoji 👋🏽 and 東京", "<|endoftext|> is text here"]
    assert fast.encode(held_out) == slow.encode(held_out)
    assert proven_encoder(slow, fast, held_out) is fast
    # Character spans computed from byte lengths match tokenizers' own offsets, batch-wide.
    assert (fast.encode_batch(held_out).spans == slow.encode_batch(held_out).spans).all()
    fast_metrics, slow_metrics = measure(fast, held_out), measure(slow, held_out)
    assert fast_metrics.pop("encoded_by") == "tiktoken" and slow_metrics.pop("encoded_by") == "tokenizers"
    assert fast_metrics == pytest.approx(slow_metrics)


def test_a_fast_encoder_that_disagrees_is_not_used(bytebpe_files):
    slow, _ = version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    impostor = reference_encoder("gpt2")  # different ids for the same text
    assert proven_encoder(slow, impostor, lines(5)) is slow


def test_reference_spans_cover_the_text_in_order():
    encoder = reference_encoder("cl100k_base")
    text = "El niño juega 東京 👋🏽 ok"
    _ids, spans = encoder.encode_batch(["first line", text]).line(1)
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    # Ordered, overlapping only where one character is split into several tokens, covering every character.
    assert all(a[0] <= b[0] and b[0] >= a[1] - 1 for a, b in itertools.pairwise(spans))
    assert set().union(*(range(s, e) for s, e in spans)) == set(range(len(text)))
    split = [(s, e) for s, e in spans if spans.count((s, e)) > 1]
    assert split and all(e - s == 1 and len(text[s].encode()) > 1 for s, e in split)


def test_curve_sizes_double_up_to_the_vocabulary():
    assert curve_sizes(8000) == [1000, 2000, 4000, 8000]
    assert curve_sizes(1000) == [1000]
    assert curve_sizes(900) == [900]


@pytest.mark.parametrize("spec", [{"vocab_size": 3000}, {"vocab_size": 3000, "byte_level": False, "pre_tokenizer": "metaspace",
                                                         "byte_fallback": True}])
def test_vocab_curve_truncates_merges_and_fertility_falls(spec):
    resolved = resolve_spec(spec)
    tokenizer = with_tokenizers.train(resolved, lines())
    files = version_contents(resolved, tokenizer, {}, {})
    curve = vocab_curve(files, json.loads(files["manifest.json"]), lines(50, offset=400))
    model = json.loads(files["tokenizer.json"])["model"]
    base = len(model["vocab"]) - len(model["merges"])  # below this no merge is left to drop
    assert [p["vocab_size"] for p in curve] == [s for s in curve_sizes(tokenizer.get_vocab_size()) if s >= base]
    assert len(curve) >= 2
    fertilities = [p["fertility"] for p in curve]
    assert fertilities == sorted(fertilities, reverse=True) and fertilities[0] > fertilities[-1]
    # The full-size point is exactly the version's own fertility on the same text.
    full = measure(TokenizersEncoder("v", tokenizer), lines(50, offset=400))
    assert curve[-1]["fertility"] == pytest.approx(full["fertility"])


@pytest.mark.parametrize("algorithm", ["unigram", "bpe"])
@pytest.mark.slow
def test_sentencepiece_engine_matches_its_tokenizer_json(algorithm, monkeypatch):
    from tokenmill.evaluation.encoders import SentencePieceEncoder, TokenizersEncoder
    from tokenmill.training.with_sentencepiece import train_sentencepiece

    spec = resolve_spec({"library": "sentencepiece", "algorithm": algorithm, "vocab_size": 3000, "byte_fallback": True})
    result = train_sentencepiece(spec, lines())
    files = {"tokenizer.model": result.model, "tokenizer.json": result.tokenizer_json.encode(), "manifest.json": b"{}"}
    engine, fast = version_encoders("spm", files, {})
    assert isinstance(engine, SentencePieceEncoder) and engine.encoded_by == "sentencepiece"
    # Also a word at a time (tokenmill.evaluation.word_cache), to be proven on each corpus.
    assert fast is not None and fast.encoded_by == "sentencepiece+word cache"
    reference = TokenizersEncoder("spm", Tokenizer.from_str(result.tokenizer_json))
    held_out = [*lines(60, offset=500), "tabs\tand  spaces ", "  leading", "emoji 👋🏽 and 東京", "ascii only"]
    theirs = measure(reference, held_out)
    assert theirs.pop("encoded_by") == "tokenizers"
    for encoder in [engine] + [fast] * (fast is not None):
        assert encoder.encode(held_out) == reference.encode(held_out)
        ours_batch, theirs_batch = encoder.encode_batch(held_out), reference.encode_batch(held_out)
        # Byte-fallback pieces: tokenizers gives a whole run of unknown characters to each of its
        # bytes, we give each byte its own character; every other span is the same.
        plain = ~np.isin(ours_batch.flat, list(encoder.byte_fallback_ids))
        assert (ours_batch.spans[plain] == theirs_batch.spans[plain]).all()
        ours = measure(encoder, held_out)
        import tokenmill.evaluation.measuring as evaluation

        with monkeypatch.context() as patch:
            patch.setattr(evaluation, "SHARD_PROCESSES", 2)
            patch.setattr(evaluation, "SHARD_AFTER", 1)
            patch.setattr(evaluation, "BATCH_LINES", 16)
            assert measure(encoder, held_out) == ours  # in two worker processes, the same numbers
        assert ours.pop("encoded_by") == encoder.encoded_by
        assert ours == pytest.approx(theirs)


def test_sentencepiece_without_byte_fallback_is_measured_through_tokenizer_json():
    from tokenmill.training.with_sentencepiece import train_sentencepiece

    spec = resolve_spec({"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 3000})
    result = train_sentencepiece(spec, lines())
    files = {"tokenizer.model": result.model, "tokenizer.json": result.tokenizer_json.encode()}
    engine, _ = version_encoders("spm", files, {})
    assert engine.encoded_by == "tokenizers"  # <unk> pieces hide how many bytes they stand for


@pytest.mark.slow
def test_measuring_in_processes_gives_the_same_metrics(bytebpe_files, monkeypatch):
    import tokenmill.evaluation.measuring as evaluation

    _, fast = version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    text = lines(200, offset=300)
    monkeypatch.setattr(evaluation, "SHARD_PROCESSES", 1)
    here = measure(fast, text)
    gpt2_here = measure(reference_encoder("gpt2"), text)
    monkeypatch.setattr(evaluation, "SHARD_PROCESSES", 2)
    monkeypatch.setattr(evaluation, "SHARD_AFTER", 1)
    monkeypatch.setattr(evaluation, "BATCH_LINES", 64)  # several batches for each process
    spread = measure(fast, text)
    assert spread == here
    # The worker processes stay for the next measurement; one that died is replaced.
    from tokenmill.evaluation import shards

    workers = shards.start(2)
    assert measure(fast, text) == here and shards.start(2) == workers
    workers[0].kill()
    workers[0].wait()
    assert measure(fast, text) == here and shards.start(2)[0] is not workers[0]
    # References travel by name.
    assert measure(reference_encoder("gpt2"), text) == gpt2_here


@pytest.mark.slow
def test_a_worker_that_dies_fails_the_measurement_and_frees_its_feeders(bytebpe_files, monkeypatch):
    import threading

    import tokenmill.evaluation.measuring as evaluation
    from tokenmill.evaluation import shards

    _, fast = version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    text = lines(60, offset=300)
    expected = measure(fast, text)  # in this process
    monkeypatch.setattr(evaluation, "SHARD_PROCESSES", 2)
    monkeypatch.setattr(evaluation, "SHARD_AFTER", 1)
    monkeypatch.setattr(evaluation, "BATCH_LINES", 16)
    before = threading.active_count()
    # A batch the encoder cannot take ends the worker that reads it, mid-measurement: its feeder
    # then meets a broken pipe.
    poison = [[None]]
    with pytest.raises(shards.WorkerFailed):
        shards.measure_in_processes(fast, iter(poison + [text[i:i + 16] for i in range(0, len(text), 16)] * 20), 2)
    assert threading.active_count() == before
    assert measure(fast, text) == expected  # the pool recovers
    assert all(worker.poll() is None for worker in shards.start(2))


def test_a_worker_dead_before_the_measurement_fails_it_as_a_worker_failure(bytebpe_files, monkeypatch):
    from tokenmill.evaluation import shards

    _, fast = version_encoders("v", bytebpe_files, json.loads(bytebpe_files["manifest.json"]))
    workers = shards.start(2)
    workers[0].kill()
    workers[0].wait()
    with monkeypatch.context() as patched:
        patched.setattr(shards, "start", lambda processes: workers[:processes])  # as if it died just after
        with pytest.raises(shards.WorkerFailed):
            shards.measure_in_processes(fast, iter([lines(16)] * 4), 2)
    assert all(worker.poll() is None for worker in shards.start(2))  # replaced


@pytest.mark.slow
def test_a_forked_child_leaves_its_parents_workers_alone():
    import os

    from tokenmill.evaluation import shards

    workers = shards.start(2)
    pid = os.fork()
    if pid == 0:  # the child: no pool of its own until it measures
        os._exit(0 if not shards._POOL and not shards._POOL_LOCK.locked() else 1)
    assert os.waitpid(pid, 0)[1] == 0
    assert shards.start(2) == workers and all(worker.poll() is None for worker in workers)
    shards.stop()
    assert all(worker.returncode is not None for worker in workers)
