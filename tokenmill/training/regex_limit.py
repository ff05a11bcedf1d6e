"""A custom pre-tokenization regex's time on one document, bounded while training (issue 20.3).

The submission probe (`spec._check_regex`) tries a custom regex on texts made from the regex
itself; it misses regexes whose slow texts need more structure than one repeated piece
(tokenmill.sandboxed.regex_probe). On such a document a backtracking engine can take hours. So,
while training, a document may keep a custom regex busy for at most `regex_seconds` (a
parameter of every training function, `REGEX_DOCUMENT_SECONDS` by default) plus a second per
`CHARACTERS_PER_SECOND` of its characters (about a tenth of the engines' pace on one core: an
ordinary document's time grows with its length, and an 8 MiB one, the longest a corpus may
hold, takes 1 to 3 s of Python's regex on a busy machine). Past it the job fails with
`SlowRegex`, which names the regex, the limit and the document (its number among the texts,
and its corpus where the caller knows it). Each engine is bounded its own way:

- Python's `regex` (library tokenmill's counting children, and counting in parts): the split
  itself runs with regex's `timeout=` (`spills.split_by`).
- Oniguruma (library tokenizers) runs inside tokenizers' trainer, on its Rust threads, where
  nothing can interrupt it. So each document is first split by Python's `regex` within the
  limit (`checked`) before the trainer sees it: a document regex is too slow on never reaches
  Oniguruma. On the slow texts we tried, regex was the slower engine (25 s where Oniguruma took
  0.8 s), and the submission probe refuses a regex slow in either, so this refuses what
  submission would have. Oniguruma giving up on its own (over 10,000,000 retries in one match
  attempt: a Rust panic) is named too (`engine_gave_up`).
- fancy_regex (library rustbpe) gives up past 1,000,000 backtracking steps in one match attempt
  (a panic; `engine_gave_up`), but a document of many attempts each under that can still take
  hours. rustbpe splits `BATCH` documents at a time on every core in compiled code, so its child
  process is watched a batch at a time (`Batches`): a batch that takes longer than the limit
  (with its characters' allowance) ends the child.

Deliberately not handled: the presets (gpt2, cl100k, o200k), tiktoken's own patterns, linear in
these engines; the bound costs time (regex's `timeout=` doubles its time per match, and
tokenizers pays for a split of its own), so only a custom regex pays it. Nor a regex slow in
Oniguruma alone, under its retry limit (none found): the job's time limit is the backstop there.
"""

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from tokenmill.errors import InvalidInput
from tokenmill.training.counting import spills

REGEX_DOCUMENT_SECONDS = 10.0  # the most one document may keep a custom regex busy
SHOWN = 80  # characters of a regex a reason quotes
PYTHON_REGEX = "Python's regex engine"
BATCH = 8192  # rustbpe's refill: documents it splits at once (its default, passed explicitly)
CHARACTERS_PER_SECOND = spills.CHARACTERS_PER_SECOND  # the allowance for length beyond the limit
SLOW_EXIT = 4  # a training child's exit code for a slow document (its last stderr line says which)


def limit_of(pattern: str | None, regex_seconds: float | None) -> float | None:
    """The time a document may take under the spec's regex: `regex_seconds` for a custom one
    (`pattern`, the spec's `pre_tokenizer_regex`), None (no bound) for a preset."""
    return regex_seconds if pattern and regex_seconds else None


class SlowRegex(InvalidInput):
    """A custom regex ran past its limit on a document, or its engine gave up on one: why a job failed.
    `first` and `last` number the documents (from 0) among the texts the training was given, when known."""

    def __init__(self, pattern: str, what: str, first: int | None = None, last: int | None = None,
                 where: str | None = None) -> None:
        self.pattern, self.what, self.first, self.last = pattern, what, first, last
        if where is None:
            where = "a document" if first is None else (
                f"document {first + 1:,}" if last in (None, first) else f"one of documents {first + 1:,} to {last + 1:,}")
        shown = pattern if len(pattern) <= SHOWN else pattern[:SHOWN] + "…"
        super().__init__(f"spec.pre_tokenizer_regex: the custom regex {shown!r} {what} {where}: it backtracks "
                         "catastrophically on that text (a repetition inside a repetition, or two in a row over the "
                         "same characters?); simplify it, or split with a preset", field="spec.pre_tokenizer_regex")

    def at(self, where: str) -> "SlowRegex":
        """The same failure, its documents named as `where` says (their corpus, say)."""
        return SlowRegex(self.pattern, self.what, self.first, self.last, where)


def took_over(seconds: float, engine: str = PYTHON_REGEX) -> str:
    return f"took over {seconds:g}s (+1s per {CHARACTERS_PER_SECOND:,} characters) in {engine} on"


def engine_gave_up(engine: str, why: str) -> str:
    return f"made {engine} give up ({why}) on"


def checked(texts: Iterable[str], pattern: str, normalizer: spills.Normalizer | None, seconds: float) -> Iterator[str]:
    """The texts, each split first by Python's regex (after the normalizer) within `seconds`;
    SlowRegex for the first one it takes longer on."""
    split = spills.split_by(pattern, normalizer, seconds)
    for number, text in enumerate(texts):
        try:
            split(text)
        except TimeoutError:
            raise SlowRegex(pattern, took_over(seconds), number) from None
        yield text


class Batches:
    """Texts for an engine that takes them `BATCH` at a time and splits each batch in compiled
    code, releasing the GIL (rustbpe): a thread calls `on_slow(first, last)` (which ends the
    process) when a batch takes longer than `seconds` plus a second per CHARACTERS_PER_SECOND of
    its characters. The engine has finished a batch when it asks for the next text; after the
    last text come empty ones (which hold no piece) up to one past a whole batch, so the last
    batch is watched to its end as well."""

    def __init__(self, texts: Iterable[str], seconds: float, on_slow: Callable[[int, int], None],
                 size: int = BATCH) -> None:
        self.texts, self.seconds, self.on_slow, self.size = texts, seconds, on_slow, size
        self.pending: tuple[int, int, float] | None = None  # the batch being split: first, last, its deadline
        self.done = threading.Event()

    def __iter__(self) -> Iterator[str]:
        watcher = threading.Thread(target=self._watch, daemon=True, name="tokenmill-batch-watch")
        watcher.start()
        try:
            count = characters = 0
            texts = self._padded()
            while True:
                if count % self.size == 0:
                    # Asked for the first of a batch: the last one is done. Cleared before reading the
                    # text, so a slow read (the texts come from a store) is never the regex's fault.
                    self.pending, characters = None, 0
                if (text := next(texts, None)) is None:
                    return
                characters += len(text)
                count += 1
                if count % self.size == 0:
                    self.pending = (count - self.size, count - 1,
                                    time.monotonic() + self.seconds + characters / CHARACTERS_PER_SECOND)
                yield text
        finally:
            self.done.set()

    def in_flight(self) -> tuple[int, int] | None:
        """The batch being split now (first and last document), if any."""
        pending = self.pending
        return None if pending is None else (pending[0], pending[1])

    def stop(self) -> tuple[int, int] | None:
        """Stop watching (the engine failed); the batch that was in flight, if any."""
        self.done.set()
        return self.in_flight()

    def _padded(self) -> Iterator[str]:
        count = 0
        for text in self.texts:
            count += 1
            yield text
        if count:
            yield from [""] * (-count % self.size + 1)

    def _watch(self) -> None:
        while not self.done.wait(min(1.0, self.seconds / 4)):
            pending = self.pending
            if pending is not None and time.monotonic() > pending[2]:
                self.on_slow(pending[0], pending[1])
                return


def report_and_exit(what: str, first: int | None, last: int | None) -> None:
    """A training child's end for a slow document: which, on stderr's last line, then SLOW_EXIT."""
    sys.stderr.write("\n" + json.dumps({"what": what, "first": first, "last": last}) + "\n")
    sys.stderr.flush()
    os._exit(SLOW_EXIT)


def reported(pattern: str, said: str) -> SlowRegex:
    """The SlowRegex a child reported with `report_and_exit` (`said`: its stderr)."""
    found = json.loads(said.strip().splitlines()[-1])
    return SlowRegex(pattern, found["what"], found["first"], found["last"])
