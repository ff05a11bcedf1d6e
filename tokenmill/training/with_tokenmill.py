"""Byte-level BPE trained by Tokenmill's own engine (`library: tokenmill`): the texts counted on
every core, the merges learned from the counts, rustbpe's rule throughout.

- Counting: `training_processes` child processes (a setting; every core by default), each a
  fresh interpreter that imports `regex` and, when the spec normalizes, `tokenizers`, and
  nothing else of the service. This process reads the texts once and sends them down the
  children's pipes a batch at a time (`text_frames`), to whichever child is free; each child
  splits its documents as counting in parts does (`spills.split_by`: the spec's normalizer,
  then its regex, a custom one within `regex_seconds` per document), counts the pieces and, at
  the end of its texts, answers with its counts as three arrays (`serve`). A document past the
  limit ends the child, which says which of its texts it was; this process knows which batch
  went to which child, so the job's reason numbers the document among all the texts.
- Learning: the children's arrays, one after the other, learned by `merge_learner` in this
  process (which first adds up the copies of a piece that several children counted), holding
  only its own copy of them (`learned_from_counts`). It is compiled and releases the GIL, so the job's heartbeat
  and memory guard run meanwhile (rustbpe holds the GIL, which is why it learns in a child).
- The tokenizer: `with_rustbpe.to_tokenizer`, the pipeline, ids and files of library rustbpe.

Counts are sums and the learner is rustbpe's, so a spec gives library rustbpe's merges on the
same texts, whatever the number of processes or the order the texts reach them (tests hold
both). What is refused is what rustbpe refuses (`spec.rustbpe_refusal`); `min_frequency` is
not applied either, as in rustbpe (a corpus of a few MB still sees its last merge more often).
"""

import bisect
import ctypes
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, suppress
from itertools import chain
from queue import Empty, Full, Queue
from threading import Thread
from typing import IO, TYPE_CHECKING, cast

from tokenmill.errors import SlowDocument
from tokenmill.training.counting import spills
from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS, SLOW_EXIT, SlowRegex, limit_of, took_over
from tokenmill.training.text_frames import batches, frames, read_texts, write_frame, write_texts

if TYPE_CHECKING:  # numpy too: a counting child does not import it (20 MiB each)
    import numpy as np
    import numpy.typing as npt
    from tokenizers import Tokenizer

    from tokenmill.training.counting.merge import Counts
    from tokenmill.training.spec import TrainingSpec

CHILD = "from tokenmill.training.with_tokenmill import serve; serve()"
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


def train_tokenmill(spec: "TrainingSpec", texts: Iterable[str], processes: int | None = None,
                    regex_seconds: float | None = REGEX_DOCUMENT_SECONDS) -> "Tokenizer":
    """Train byte-level BPE on the texts, as the spec says (see the module docstring), counting
    with `processes` children (None: the `training_processes` setting). SlowRegex when a custom
    regex takes longer than `regex_seconds` on one document."""
    from tokenmill.settings import get_settings
    from tokenmill.training import with_tokenizers
    from tokenmill.training.spec import rustbpe_refusal

    if (why := rustbpe_refusal(spec)) is not None:
        raise ValueError(f"spec.{why}")
    pattern = spec.regex_pattern
    assert pattern is not None  # rustbpe_refusal() has made sure
    normalizer = with_tokenizers.normalizer_of(spec)
    threads = max(1, processes or get_settings().training_processes)
    if normalizer is None and (preset := _compiled_preset(pattern)) is not None:
        from tokenmill.training.splitting.counting import counted_in_threads

        return learned_from_counts(spec, lambda: counted_in_threads(texts, preset, threads))
    seconds = limit_of(spec.pre_tokenizer_regex, regex_seconds)
    try:
        return learned_from_counts(spec, lambda: counted_in_children(pattern, normalizer, texts, threads, seconds))
    except SlowDocument as slow:
        assert spec.pre_tokenizer_regex is not None and seconds is not None  # only a custom regex is limited
        raise SlowRegex(spec.pre_tokenizer_regex, took_over(seconds), slow.number) from None


def counted_in_children(pattern: str, normalizer: object | None, texts: Iterable[str], processes: int,
                        seconds: float | None = None) -> "Counts":
    """The pieces of the texts (normalized, then split by `pattern`, each document within
    `seconds` if given: SlowDocument past it) counted by `processes` children: each piece's
    length in bytes, its count and their bytes, a piece once per child that saw it."""
    import numpy as np

    heading = [json.dumps({"pattern": pattern, "seconds": seconds}).encode(),
               pickle.dumps(normalizer) if normalizer is not None else b""]
    with ExitStack() as stack:
        children = [stack.enter_context(_Counter(heading)) for _ in range(max(1, processes))]
        _send(children, texts)
        counted = [child.counts() for child in children]
    lengths, seen, data = (np.concatenate([part[i] for part in counted]) for i in range(3))
    del counted  # the children's frames: the copies above are what the learner reads
    return lengths, seen, data


def _compiled_preset(pattern: str) -> str | None:
    """The preset the compiled splitter counts for this pattern (tokenmill.training.splitting),
    or None: a custom regex (or any other) is counted by `regex` in children."""
    from tokenmill.training.splitting.counting import preset_of

    return preset_of(pattern)


def learned_from_counts(spec: "TrainingSpec", count: "Callable[[], Counts]") -> "Tokenizer":
    """The tokenizer of the merges learned from the pieces `count()` counts (each one's length,
    count and bytes). They are counted here, not passed in, so that nothing but the learner's
    own copy of them is held while it learns (15 MiB less on 100 MB of mixed text)."""
    from tokenmill.training import merge_learner  # numba: imported by a process that learns
    from tokenmill.training.with_rustbpe import to_tokenizer

    merges = merges_wanted(spec)
    pieces = merge_learner.pieces_to_merge(*count(), merges)
    return to_tokenizer(spec, merge_learner.learned(pieces, merges))


def merges_wanted(spec: "TrainingSpec") -> int:
    """How many merges fill the spec's vocabulary beside its special tokens and the 256 bytes."""
    from tokenmill.training.spec import BYTE_ALPHABET

    return spec.vocab_size - len(spec.special_tokens or []) - BYTE_ALPHABET


class _Counter:
    """One counting child: texts go down its stdin, its counts come back on its stdout. It is
    killed if this process stops before it has answered (a time limit, a cancel, a fault), and
    by the kernel if this process dies (`serve`)."""

    def __init__(self, heading: list[bytes]) -> None:
        # The batches it was given: where each starts among its texts, and among all the texts.
        self.starts: list[int] = []
        self.firsts: list[int] = []
        self.given = 0
        self.errors = tempfile.TemporaryFile()  # a file, not a pipe: a chatty child can never block on it
        self.process = subprocess.Popen([sys.executable, "-c", CHILD, str(os.getpid())], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.errors)
        self.stdin = cast(IO[bytes], self.process.stdin)
        try:
            for frame in heading:
                write_frame(self.stdin, frame)
        except OSError:
            pass  # it ended at once: feeding it fails next, and says why

    def __enter__(self) -> "_Counter":
        return self

    def __exit__(self, *exc: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.errors):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass  # stdin's last flush, to a child that is gone

    def give(self, first: int, batch: list[str]) -> None:
        """Send a batch, the texts `first` on of all the texts."""
        self.starts.append(self.given)
        self.firsts.append(first)
        self.given += len(batch)
        write_texts(self.stdin, batch)

    def counts(self) -> "tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint8]]":
        """What the child counted: each piece's length in bytes, its count, and all their bytes
        one after the other; or its failure, once it has ended."""
        import numpy as np

        answer = list(frames(cast(IO[bytes], self.process.stdout)))
        if self.process.wait() != 0 or len(answer) != 3:
            raise self.failure()
        lengths, counts, data = answer
        return (np.frombuffer(lengths, dtype=np.int64), np.frombuffer(counts, dtype=np.int64),
                np.frombuffer(data, dtype=np.uint8))

    def failure(self) -> Exception:
        """Why the child failed: a document past the regex's limit (SlowDocument, numbered among
        all the texts), or its exit code and the end of what it said (it has a few seconds to end)."""
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=10)
        self.errors.seek(0)
        said = self.errors.read().decode("utf-8", "replace").strip()
        if self.process.returncode == SLOW_EXIT:
            mine = int(said.splitlines()[-1])  # the document's number among this child's texts
            batch = bisect.bisect_right(self.starts, mine) - 1
            return SlowDocument(self.firsts[batch] + mine - self.starts[batch])
        return RuntimeError(f"a counting process failed (exit {self.process.returncode}): {said[-2000:]}")


def _send(children: list[_Counter], texts: Iterable[str]) -> None:
    # One thread per child writes it batches from a short queue, so whichever child is done with
    # its batch takes the next one (a pipe has room long before its child is free), then closes
    # its stdin: the children count what is left and answer.
    queue: Queue[tuple[int, list[str]] | None] = Queue(maxsize=len(children))
    failed: list[tuple[_Counter, BaseException]] = []

    def feed(child: _Counter) -> None:
        try:
            while (item := queue.get()) is not None:
                child.give(*item)
        except BaseException as exc:  # a broken pipe (the child ended early: its exit code and stderr say why)
            failed.append((child, exc))
        finally:
            with suppress(OSError):
                child.stdin.close()  # the end of its texts, whatever happened: it never waits for more

    feeders = [Thread(target=feed, args=(child,), daemon=True, name="tokenmill-feed") for child in children]
    for feeder in feeders:
        feeder.start()
    try:
        for item in chain(numbered(batches(texts)), [None] * len(children)):
            while not failed:
                try:
                    queue.put(item, timeout=0.5)
                    break
                except Full:
                    continue
            if failed:
                child, exc = failed[0]
                raise child.failure() from exc
        for feeder in feeders:
            feeder.join()
    finally:
        # However this ends, no feeder is left waiting on the queue (a worker process lives on
        # for other jobs); one still writing fails once the caller has killed its child.
        while True:
            try:
                queue.get_nowait()
            except Empty:
                break
        for _ in feeders:
            queue.put_nowait(None)


def numbered(texts: Iterable[list[str]]) -> Iterator[tuple[int, list[str]]]:
    """Each batch with the number of its first text among all the texts."""
    first = 0
    for batch in texts:
        yield first, batch
        first += len(batch)


def serve() -> None:
    """The child's side: the pattern and limit, the normalizer, then texts on stdin; on stdout,
    three frames: the pieces' lengths in bytes and their counts (int64 each), then their bytes.
    A document past the limit: its number among the texts on stderr's last line, exit SLOW_EXIT."""
    _die_with_parent()
    stream = sys.stdin.buffer
    found = frames(stream)
    heading = json.loads(next(found))
    normalizer = next(found)
    split = spills.split_by(heading["pattern"], pickle.loads(normalizer) if normalizer else None, heading["seconds"])
    try:
        counts = spills.count(read_texts(stream), split)
    except SlowDocument as slow:
        sys.stderr.write(f"\n{slow.number}\n")
        sys.stderr.flush()
        os._exit(SLOW_EXIT)
    pieces = [piece.encode("utf-8", "surrogatepass") for piece in counts]
    out = sys.stdout.buffer
    write_frame(out, array("q", map(len, pieces)).tobytes())
    write_frame(out, array("q", counts.values()).tobytes())
    write_frame(out, b"".join(pieces))
    out.flush()
    os._exit(0)  # the counts are written: skip freeing a million objects one by one


def _die_with_parent() -> None:
    # Killed with the job's process (kill -9, the memory guard's exit, the OOM killer), a child
    # would otherwise count on to the end of its texts before noticing.
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else os.getppid()
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        return  # not Linux: the end of its stdin stops it
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)

