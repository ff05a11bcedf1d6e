"""Measuring tokenizers on corpora (DESIGN §6): versions, references, and vocabulary-size curves.

`measure` streams documents through an encoder in batches and feeds the metrics accumulator;
the rest decides which encoder measures what and makes `Evaluation` rows: a version's are
returned for the job pipeline to register with the version in one transaction; the
references' are stored by `evaluate_references` itself, after measuring.

A version's vocabulary-size curve is measured once per version, on the first CURVE_LINES
lines of every corpus it is evaluated on taken together, and each of those evaluations
carries it (`vocab_curve`, with `vocab_curve_sample`): the schema has no per-version metrics,
and a corpus deleted takes only its own row. `tokenmill.evaluation.reports.version_curve` reads it back
(and, for versions evaluated before, the per-corpus curves their rows hold).

Parallelism is the `evaluation_threads` setting alone (tokenmill.evaluation.encoders); every thread
an evaluation starts lives inside `encoding_threads` and is joined when it ends.
"""

import itertools
import json
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer

from tokenmill.corpora.reading import corpus_documents
from tokenmill.db import transaction
from tokenmill.evaluation.encoders import (
    EncodedBatch,
    Encoder,
    TiktokenEncoder,
    TokenizersEncoder,
    ahead_pool,
    encoding_threads,
    evaluation_threads,
    proven_encoder,
    reference_encoder,
    version_encoders,
)
from tokenmill.evaluation.metrics import MetricsAccumulator
from tokenmill.evaluation.references import BASELINES
from tokenmill.formats.tiktoken_format import encoding as tiktoken_encoding
from tokenmill.formats.tiktoken_format import parse_rank_file
from tokenmill.models import Corpus, Evaluation
from tokenmill.settings import get_settings
from tokenmill.store import ObjectStore

if TYPE_CHECKING:
    from tokenmill.evaluation.parts import Spread

BATCH_LINES = 1024
SAMPLE_SEED = 0  # of every evaluation's sample (recorded with it)
SAMPLE_BATCH = 4096  # documents drawn for at a time
PROOF_LINES = 2000  # lines on which tiktoken's ids must equal tokenizers' before it is trusted
CURVE_LINES = 2000  # lines of each corpus in the sample of a version's vocabulary-size curve
CURVE_START = 1000
SHARD_AFTER = 16  # batches (16,384 lines) before a corpus is measured in several processes
# Measuring processes: None for the evaluation_threads setting (a test may fix a number here).
SHARD_PROCESSES: int | None = None

Progress = Callable[[float], None]


def batched(items: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


def measure(encoder: Encoder, documents: Iterable[str], max_bytes: int | None = None) -> dict[str, Any]:
    """The §6 metrics of an encoder on documents (about max_bytes characters of them at most), plus what encoded it."""
    return metrics_of(encoder, accumulated(encoder, _capped(documents, max_bytes)))


def metrics_of(encoder: Encoder, accumulator: MetricsAccumulator) -> dict[str, Any]:
    """The §6 metrics an accumulator holds, with what encoded the lines it measured."""
    return {**accumulator.result(), "encoded_by": encoder.encoded_by}


def accumulated(encoder: Encoder, batches: Iterator[list[str]]) -> MetricsAccumulator:
    """The metrics' sums of an encoder on batches of documents: in several processes on more than
    SHARD_AFTER batches (worth their start-up only then), else here."""
    processes = SHARD_PROCESSES or evaluation_threads()
    if encoder.recipe is not None and processes > 1:
        head = list(itertools.islice(batches, SHARD_AFTER))
        batches = itertools.chain(head, batches)
        if len(head) == SHARD_AFTER:
            from tokenmill.evaluation.shards import measure_in_processes

            return measure_in_processes(encoder, batches, processes)
    with encoding_threads():
        return _measure_here(encoder, batches)


def _measure_here(encoder: Encoder, batches: Iterator[list[str]]) -> MetricsAccumulator:
    accumulator = MetricsAccumulator(encoder.vocab_size, encoder.unk_id, encoder.byte_fallback_ids)
    encoder.begin()
    for batch, encoded in _encoded_ahead(encoder, batches):
        accumulator.add_batch(batch, encoded.flat, encoded.spans, encoded.counts, encoded.roundtrips)
    return accumulator


def _capped(documents: Iterable[str], max_chars: int | None) -> Iterator[list[str]]:
    seen = 0
    for batch in batched(documents, BATCH_LINES):
        yield batch
        seen += sum(map(len, batch))
        if max_chars is not None and seen >= max_chars:
            return


def _encoded_ahead(encoder: Encoder, batches: Iterator[list[str]]) -> Iterator[tuple[list[str], EncodedBatch]]:
    # Encoding (native code, outside the GIL) of the next batch overlaps the metrics of this one,
    # on the thread of the caller's `encoding_threads`.
    ahead = ahead_pool()
    if ahead is None:
        yield from ((batch, encoder.encode_batch(batch)) for batch in batches)
        return
    batch = next(batches, None)
    pending = ahead.submit(encoder.encode_batch, batch) if batch is not None else None
    while batch is not None and pending is not None:  # both, or neither
        following = next(batches, None)
        encoded = pending.result()
        pending = ahead.submit(encoder.encode_batch, following) if following is not None else None
        yield batch, encoded
        batch = following


def sample_share(corpus: Corpus, sample_bytes: int | None = None) -> float:
    """The share of a corpus's documents an evaluation measures: all of a corpus up to
    TOKENMILL_EVALUATION_SAMPLE_BYTES (0: every corpus whole), that many bytes' worth of a larger one."""
    if sample_bytes is None:
        sample_bytes = get_settings().evaluation_sample_bytes
    if not sample_bytes or not corpus.bytes or corpus.bytes <= sample_bytes:
        return 1.0
    return sample_bytes / corpus.bytes


def evaluation_documents(store: ObjectStore, corpus: Corpus, share: float) -> Iterator[str]:
    """The documents an evaluation measures: each kept with probability `share`, drawn from a
    generator seeded by SAMPLE_SEED and the corpus's sha256, so every version and reference is
    measured on the same documents of a corpus."""
    documents = corpus_documents(store, corpus)
    if share >= 1.0:
        yield from documents
        return
    generator = np.random.default_rng([SAMPLE_SEED, int(corpus.sha256[:15], 16)])
    for batch in batched(documents, SAMPLE_BATCH):
        draws = generator.random(len(batch))
        yield from (document for document, draw in zip(batch, draws) if draw < share)


def sample_record(share: float) -> dict[str, Any]:
    """What an evaluation says of its sample (with `documents` from its metrics)."""
    return {"share": share, "seed": SAMPLE_SEED, "whole": share >= 1.0}


def measure_corpus(encoder: Encoder, store: ObjectStore, corpus: Corpus, max_bytes: int | None = None,
                   spread: "Spread | None" = None, whole: bool = False) -> dict[str, Any]:
    """The metrics of an encoder on a corpus's evaluation sample (every document, if `whole`),
    with the sample they were measured on. A corpus measured whole is measured in parts by many
    workers, given a `spread` that takes it (tokenmill.evaluation.parts)."""
    share = 1.0 if whole else sample_share(corpus)
    if share >= 1.0 and max_bytes is None and spread is not None and spread.takes(corpus, encoder):
        from tokenmill.evaluation.parts import measure_spread

        metrics = metrics_of(encoder, measure_spread(encoder, store, corpus, spread))
    else:
        metrics = measure(encoder, evaluation_documents(store, corpus, share), max_bytes)
    return {**metrics, "sample": sample_record(share)}


def head(store: ObjectStore, corpus: Corpus, lines: int) -> list[str]:
    return list(itertools.islice(corpus_documents(store, corpus), lines))


def evaluation_row(team_id: uuid.UUID, corpus: Corpus, metrics: dict[str, Any],
                   **subject: uuid.UUID | str | None) -> Evaluation:
    """The row of one measurement; `subject` is version_id= or reference= (and run_id=, if any)."""
    return Evaluation(team_id=team_id, corpus_id=corpus.id, word_rule=str(metrics["word_rule"]), metrics=metrics, **subject)


def evaluate_version(
    store: ObjectStore, name: str, files: dict[str, bytes], corpora: Sequence[Corpus], progress: Progress,
    max_bytes: int | None = None, curve: bool = True, spread: "Spread | None" = None, whole: bool = False,
) -> list[tuple[Corpus, dict[str, Any]]]:
    """Metrics of a version's files on each corpus (none, and no encoder built, without corpora).

    With `curve`, the version's vocabulary-size curve (BPE only) is measured once, on the first
    CURVE_LINES lines of every corpus together, and every corpus's metrics carry it.
    """
    if not corpora:
        return []
    manifest = json.loads(files["manifest.json"])
    steps = len(corpora) + curve
    with encoding_threads():
        slow, fast = version_encoders(name, files, manifest)
        results, curve_sample = [], []
        for index, corpus in enumerate(corpora):
            sample = head(store, corpus, max(PROOF_LINES, CURVE_LINES))
            encoder = proven_encoder(slow, fast, sample[:PROOF_LINES])
            results.append((corpus, measure_corpus(encoder, store, corpus, max_bytes, spread, whole)))
            if curve:
                curve_sample += sample[:CURVE_LINES]
            progress((index + 1) / steps)
        points = vocab_curve(files, manifest, curve_sample) if curve else []
    if points:
        for _, metrics in results:
            metrics["vocab_curve"] = points
            metrics["vocab_curve_sample"] = {"corpora": len(corpora), "lines": len(curve_sample)}
    progress(1.0)
    return results


def evaluate_references(
    factory: sessionmaker[Session], store: ObjectStore, team_id: uuid.UUID, corpora: Sequence[Corpus],
    names: Sequence[str] = BASELINES, spread: "Spread | None" = None,
) -> list[Evaluation]:
    """Reference evaluations of the corpora that lack them (corpora are immutable, so once is
    enough), stored in a transaction of their own: none is open while the corpora are measured."""
    with factory() as session:
        done = {(reference, corpus_id) for reference, corpus_id in session.execute(
            select(Evaluation.reference, Evaluation.corpus_id).where(
                Evaluation.team_id == team_id, Evaluation.reference.in_(names),
                Evaluation.corpus_id.in_([c.id for c in corpora])))}
    rows = []
    with encoding_threads():
        for name in names:
            missing = [c for c in corpora if (name, c.id) not in done]
            if not missing:
                continue
            encoder = reference_encoder(name)
            for corpus in missing:
                rows.append(evaluation_row(team_id, corpus, measure_corpus(encoder, store, corpus, spread=spread),
                                           reference=name))
    with transaction(factory) as session:
        session.add_all(rows)
    return rows


def curve_sizes(vocab_size: int, start: int = CURVE_START) -> list[int]:
    """1k, 2k, 4k … below the vocabulary size, then the size itself."""
    sizes = []
    size = start
    while size < vocab_size:
        sizes.append(size)
        size *= 2
    return [*sizes, vocab_size]


def vocab_curve(files: dict[str, bytes], manifest: dict[str, Any], sample: Sequence[str]) -> list[dict[str, float]]:
    """Fertility on the sample at growing vocabulary sizes, by truncating the BPE merge list.

    The first k merges are exactly what a smaller training would have learned, so one
    training answers "which vocabulary size?". Empty for models other than BPE.
    """
    data = json.loads(files["tokenizer.json"])
    if data["model"]["type"] != "BPE" or not sample:
        return []
    full = Tokenizer.from_str(files["tokenizer.json"].decode()).get_vocab_size()
    curve = []
    for size in curve_sizes(full):  # each measure shares the caller's encoding threads (evaluate_version's)
        encoder = _truncated(files, manifest, data, size)
        if encoder is None:
            continue
        metrics = measure(encoder, sample)
        curve.append({"vocab_size": size, "fertility": metrics["fertility"],
                      "chars_per_token": metrics["chars_per_token"]})
    return curve


def _truncated(files: dict[str, bytes], manifest: dict[str, Any], data: dict[str, Any], size: int) -> Encoder | None:
    model = data["model"]
    base = len(model["vocab"]) - len(model["merges"])  # specials, alphabet (and byte tokens)
    keep = size - base - len([t for t in data["added_tokens"] if t["content"] not in model["vocab"]])
    if keep < 0:
        return None
    info = manifest.get("tiktoken") or {}
    if info.get("file") in files:
        ranks = {token: rank for token, rank in parse_rank_file(files[info["file"]]).items() if rank < base + keep}
        return TiktokenEncoder(f"curve-{size}", tiktoken_encoding(f"curve-{size}", ranks, info["special_tokens"], info["pat_str"]))
    # Drop what the later merges make; ids are left as they are (sentencepiece's BPE does
    # not number pieces in merge order, so "ids below k" would drop characters).
    pairs = [pair if isinstance(pair, list) else pair.split(" ") for pair in model["merges"]]
    kept = pairs[:keep]
    dropped = {"".join(pair) for pair in pairs[keep:]} - {"".join(pair) for pair in kept} - {p for pair in kept for p in pair}
    vocab = {token: i for token, i in model["vocab"].items() if token not in dropped}
    truncated = dict(data, model=dict(model, vocab=vocab, merges=model["merges"][:keep]))
    return TokenizersEncoder(f"curve-{size}", Tokenizer.from_str(json.dumps(truncated)))
