"""Measuring one corpus in several processes: each encodes its share of the batches into its own
metrics accumulator, and the accumulators are merged. The processes are kept for the next
measurement (of the next corpus, reference or version).

One process per evaluation thread (the `evaluation_threads` setting), each encoding on one
thread (TOKENIZERS_PARALLELISM=false), keeps every core busy with encoding and metrics alike, where one process would leave the metrics'
Python work and the ids' list building to a single core. The workers are plain subprocesses
(`python -m tokenmill.evaluation.shards`) fed pickled batches on stdin, because a Celery prefork child
may not start `multiprocessing` children. The threads that feed them live for one
measurement and are joined before it returns.
"""

import io
import os
import pickle
import queue
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, cast

from tokenmill.evaluation.encoders import Encoder, Recipe, recipe_encoder
from tokenmill.evaluation.metrics import MetricsAccumulator

_POOL: list[subprocess.Popen[bytes]] = []  # worker processes kept between measurements
_POOL_LOCK = threading.Lock()


def _pipes(worker: subprocess.Popen[bytes]) -> tuple[io.BufferedWriter, io.BufferedReader]:
    """A worker's stdin and stdout: buffered pipes, as `start` opens them (Popen's types cannot tell)."""
    return cast(io.BufferedWriter, worker.stdin), cast(io.BufferedReader, worker.stdout)


def _forget_after_fork() -> None:
    """In a forked child: drop the parent's workers (closing our copies of their pipes, so they
    still end with the parent, and without flushing what a parent's thread was writing) and
    the lock, which another thread may have held."""
    global _POOL_LOCK
    for worker in _POOL:
        stdin, stdout = _pipes(worker)
        stdin.raw.close()
        stdout.raw.close()
    _POOL.clear()
    _POOL_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def start(processes: int) -> list[subprocess.Popen[bytes]]:
    """The pool's first `processes` workers, started if missing (they outlive one measurement:
    starting Python with numpy and the tokenizer libraries costs a few tenths of a second)."""
    _POOL[:] = [worker for worker in _POOL if worker.poll() is None]
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    while len(_POOL) < processes:
        _POOL.append(subprocess.Popen([sys.executable, "-m", "tokenmill.evaluation.shards"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env))
    return _POOL[:processes]


def stop() -> None:
    """End the pool's workers (they also end by themselves when this process does)."""
    with _POOL_LOCK:
        for worker in _POOL:
            _pipes(worker)[0].close()
        for worker in _POOL:
            worker.wait(timeout=30)
        _POOL.clear()


def measure_in_processes(encoder: Encoder, batches: Iterator[list[str]], processes: int) -> MetricsAccumulator:
    """The metrics' sums of the batches, measured by `processes` worker processes."""
    if encoder.recipe is None:
        raise ValueError(f"no other process can build the encoder {encoder.name}")
    recipe = encoder.recipe | {"name": encoder.name}
    with _POOL_LOCK:
        workers = start(processes)
        try:
            for worker in workers:
                _send(_pipes(worker)[0], recipe)
            _feed(workers, batches)
            parts: list[MetricsAccumulator] = [pickle.load(_pipes(worker)[1]) for worker in workers]
        except BaseException as error:
            # A worker gone (a broken pipe, an answer cut short): named by the exit codes before the kill.
            failed = WorkerFailed(workers) if isinstance(error, (OSError, EOFError, pickle.UnpicklingError)) else None
            for worker in workers:
                worker.kill()
                worker.wait()
            if failed is not None:
                raise failed from error
            raise
    total = parts[0]
    for part in parts[1:]:
        total.merge(part)
    return total


def _feed(workers: list[subprocess.Popen[bytes]], batches: Iterator[list[str]]) -> None:
    """Hand each batch to whichever worker takes it first (one feeding thread per worker, so
    a worker busy with a long batch never holds up the others), then tell each to finish."""
    pending: queue.Queue[list[str] | None] = queue.Queue(maxsize=len(workers))
    failures: list[BaseException] = []

    def feed(worker: subprocess.Popen[bytes]) -> None:
        stdin = _pipes(worker)[0]
        try:
            while (batch := pending.get()) is not None:
                _send(stdin, batch)
            _send(stdin, None)
        except BaseException as error:  # a worker gone: the caller kills them all
            failures.append(error)

    def put(item: list[str] | None) -> None:
        while not failures:
            try:
                return pending.put(item, timeout=1)
            except queue.Full:
                continue
        raise WorkerFailed(workers) from failures[0]

    threads = [threading.Thread(target=feed, args=(worker,), daemon=True, name=f"tokenmill-feed-{worker.pid}")
               for worker in workers]
    for thread in threads:
        thread.start()
    finished = False
    try:
        for batch in batches:
            put(batch)
        for _ in threads:
            put(None)
        finished = True
    finally:
        if not finished:
            # Release every feeding thread: those waiting for a batch get None now, those
            # writing to a worker fail once the caller kills it.
            while True:
                try:
                    pending.get_nowait()
                except queue.Empty:
                    break
            for _ in threads:
                pending.put_nowait(None)
    for thread in threads:
        thread.join()
    if failures:
        raise WorkerFailed(workers) from failures[0]


class WorkerFailed(RuntimeError):
    """A measuring worker process went away; what it printed is in this process's log."""

    def __init__(self, workers: list[subprocess.Popen[bytes]]) -> None:
        codes = [worker.poll() for worker in workers]
        super().__init__(f"a measuring worker process failed (exit codes {codes}); its error is logged above")


def _send(stream: BinaryIO, message: Any) -> None:
    pickle.dump(message, stream, protocol=pickle.HIGHEST_PROTOCOL)
    stream.flush()


def _messages(stream: BinaryIO) -> Iterable[Any]:
    while (message := pickle.load(stream)) is not None:
        yield message


def main() -> None:
    """Worker side: for each measurement, read the recipe, then batches until None, and answer
    with the accumulator; the encoder is kept while the recipe stays the same. Ends quietly when
    the measuring process closes the pipe or goes away."""
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    recipe: Recipe | None = None
    encoder: Encoder | None = None
    try:
        while True:
            received: Recipe = pickle.load(source)
            if encoder is None or received != recipe:
                recipe, encoder = received, recipe_encoder(received, threads=1)
            accumulator = MetricsAccumulator(encoder.vocab_size, encoder.unk_id, encoder.byte_fallback_ids)
            encoder.begin()
            for batch in _messages(source):
                encoded = encoder.encode_batch(batch)
                accumulator.add_batch(batch, encoded.flat, encoded.spans, encoded.counts, encoded.roundtrips)
            _send(sink, accumulator)
    except (EOFError, BrokenPipeError):
        return


if __name__ == "__main__":
    main()
