"""Measuring one corpus in several processes: each encodes its share of the batches into its own
metrics accumulator, and the accumulators are merged.

For the tiktoken and sentencepiece engines, whose encoders are fast enough that the metrics'
Python work (and tiktoken's GIL-held list building) bounds one process: one process per core
measures about half as much again as one process with threads. The workers are plain
subprocesses (`python -m tokenmill.shards`) fed pickled batches on stdin, because a Celery
prefork child may not start `multiprocessing` children. Deliberately not for the
`tokenizers` engine: its encode already keeps every core busy.
"""

import os
import pickle
import subprocess
import sys
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from tokenmill.encoders import Encoder, SentencePieceEncoder, rank_file_encoder, reference_encoder
from tokenmill.metrics import MetricsAccumulator


def measure_in_processes(encoder: Encoder, batches: Iterator[list[str]], processes: int) -> dict[str, Any]:
    """The §6 metrics of the batches, measured by `processes` worker processes."""
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    workers = [subprocess.Popen([sys.executable, "-m", "tokenmill.shards"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env) for _ in range(processes)]
    try:
        for worker in workers:
            _send(worker.stdin, encoder.recipe | {"name": encoder.name})
        for index, batch in enumerate(batches):
            _send(workers[index % processes].stdin, batch)
        for worker in workers:
            _send(worker.stdin, None)
            worker.stdin.close()
        parts = [pickle.load(worker.stdout) for worker in workers]
        for worker in workers:
            worker.wait(timeout=60)
    except BaseException:
        for worker in workers:
            worker.kill()
            worker.wait()
        raise
    total = parts[0]
    for part in parts[1:]:
        total.merge(part)
    return {**total.result(), "engine": encoder.engine}


def _send(stream: BinaryIO, message: Any) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def _encoder(recipe: dict) -> Encoder:
    if "reference" in recipe:
        return reference_encoder(recipe["reference"])
    if "sentencepiece" in recipe:
        return SentencePieceEncoder(recipe["name"], recipe["sentencepiece"], threads=1)
    return rank_file_encoder(recipe["name"], recipe["rank_file"], recipe["special_tokens"], recipe["pattern"], threads=1)


def _messages(stream: BinaryIO) -> Iterable[Any]:
    while (message := pickle.load(stream)) is not None:
        yield message


def main() -> None:
    """Worker side: read the recipe, then batches until None; answer with the accumulator."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    encoder = _encoder(pickle.load(source))
    if hasattr(encoder, "pool"):
        encoder.pool, encoder.threads = None, 1  # a cached reference encoder comes with threads
    accumulator = MetricsAccumulator(encoder.vocab_size, encoder.unk_id, encoder.byte_fallback_ids)
    for batch in _messages(source):
        encoded = encoder.encode_batch(batch)
        accumulator.add_batch(batch, encoded.flat, encoded.spans, encoded.counts, encoder.roundtrips(batch, encoded))
    _send(sink, accumulator)


if __name__ == "__main__":
    main()
