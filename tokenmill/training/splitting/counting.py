"""Pieces of the preset patterns, split and counted in compiled code: what `regex.findall` with
the preset's exact pattern and a `Counter` give, 9-13 times faster a process as arrays, 4-6
times as a `Counter[str]` (benchmarks/split_speed.py).

- `preset_of(pattern)`: which preset a pattern is (the spec's `regex_pattern`), or None: a custom
  regex keeps the `regex` path.
- `split(text, preset)`, `split_all(texts, preset)`: the pieces as str (tests, and anything that
  wants the strings).
- `PieceCounter`: counts the pieces of batches of texts in a compiled hash table
  (`piece_table`); its `arrays()` are what a training child sends back (each piece's length in
  bytes, its count, their bytes end to end), its `counter()` a `Counter[str]`.
- `counted(documents, preset)`: a PieceCounter of the documents, a batch at a time;
  `counted_frames(frames, preset)`: of the frames `text_frames` sends a child, read as they
  are; `counted_in_threads(documents, preset, threads)`: on several threads of this process.
- `count(documents, split)`: `spills.count`'s signature and result, compiled where the split is
  a preset's (`compiled_preset`), so a counting child switches with one line.
- `warm_up()`: every compiled loop compiled or loaded now.

The input is UTF-8 bytes, a batch of texts at a time: the texts cross a child's pipe as UTF-8,
the learner wants UTF-8, and a distinct piece is kept as the bytes it was read from, so nothing
is converted twice and no str is made per piece (but by `counter()`, which makes one per
distinct piece: half the time `count` takes). Deliberately not handled: normalization (a split
with a normalizer is not recognized; `count` falls back to it), and patterns other than the
three presets, byte for byte.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import accumulate
from queue import Queue
from threading import Thread
from typing import Any

import numpy as np
import numpy.typing as npt
import regex
from numba import njit

from tokenmill.training.counting import spills
from tokenmill.training.patterns import CL100K_PAT_STR, PATTERNS
from tokenmill.training.splitting import piece_table, scanner
from tokenmill.training.splitting.classes import table
from tokenmill.training.text_frames import batches

NUMBERS = {"gpt2": scanner.GPT2, "cl100k": scanner.CL100K, "o200k": scanner.O200K}
# The patterns each preset's scanner is proven equal to (tests/unit/test_splitter.py): PATTERNS',
# and tiktoken's own cl100k (\p{N}{1,3}+, possessive in `regex`, matches as \p{N}{1,3} there).
_PRESETS = {PATTERNS["gpt2"]: "gpt2", PATTERNS["cl100k"]: "cl100k", CL100K_PAT_STR: "cl100k", PATTERNS["o200k"]: "o200k"}

Int64s = npt.NDArray[np.int64]
Uint8s = npt.NDArray[np.uint8]
Counts = tuple[Int64s, Int64s, Uint8s]  # each piece's length in bytes, its count, their bytes end to end


def preset_of(pattern: str) -> str | None:
    """The preset whose compiled splitter gives `regex.findall(pattern, text)`, or None."""
    return _PRESETS.get(pattern)


def compiled_preset(split: spills.Split) -> str | None:
    """The preset a split is, when it is `spills.split_by`'s for a preset without a normalizer
    (the bound `findall` of the compiled pattern, default flags), else None."""
    owner = getattr(split, "__self__", None)
    if not isinstance(owner, regex.Pattern) or getattr(split, "__name__", None) != "findall":
        return None
    preset = preset_of(owner.pattern)
    return preset if preset is not None and owner.flags == regex.compile(owner.pattern).flags else None


@cache
def _table() -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint16]]:
    return table()


def encoded(texts: Sequence[str]) -> tuple[Uint8s, Int64s]:
    """The texts' UTF-8 bytes end to end (a lone surrogate as its three bytes), and each one's length in characters."""
    data = np.frombuffer("".join(texts).encode("utf-8", "surrogatepass"), dtype=np.uint8)
    return data, np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))


def decoded(data: Uint8s) -> tuple[npt.NDArray[np.uint16], Int64s]:
    """Each character's class, and where each starts in the data (and where the last ends)."""
    return scanner.decoded(data, *_table())


def split_all(texts: Sequence[str], preset: str) -> list[list[str]]:
    """Each text's pieces: `[regex.findall(pattern, text) for text in texts]` for the preset's pattern."""
    data, text_chars = encoded(texts)
    classes, _ = decoded(data)
    ends = scanner.piece_ends(classes, np.arange(len(classes) + 1), text_chars, NUMBERS[preset]).tolist()
    joined = "".join(texts)
    out: list[list[str]] = []
    at = 0
    for first, last in zip([0, *accumulate(text_chars.tolist())], accumulate(text_chars.tolist())):
        pieces = []
        while at < len(ends) and ends[at] <= last:
            pieces.append(joined[first:ends[at]])
            first = ends[at]
            at += 1
        out.append(pieces)
    return out


def split(text: str, preset: str) -> list[str]:
    """The text's pieces: `regex.findall(pattern, text)` for the preset's pattern."""
    return split_all([text], preset)[0]


class PieceCounter:
    """How often each piece of a preset's split occurs in the texts given so far."""

    def __init__(self, preset: str) -> None:
        self.preset = NUMBERS[preset]
        self._rows = np.zeros((1 << 15, 2), dtype=np.int64)  # per slot: a piece's code (0: free) and count
        self._numbers = np.zeros(1 << 15, dtype=np.int32)  # per slot: the piece's number
        self._starts = np.zeros((1 << 14) + 1, dtype=np.int64)  # per number: where its bytes start in the keys
        self._keys = np.zeros(1 << 17, dtype=np.uint8)
        self._sizes = np.zeros(2, dtype=np.int64)  # pieces, key bytes
        self._work = _Work()

    def __len__(self) -> int:
        return int(self._sizes[0])

    def add(self, texts: Sequence[str]) -> None:
        """Count the pieces of these texts (a batch: one call of the compiled loops)."""
        self.add_utf8(*encoded(texts))

    def add_utf8(self, data: Uint8s, text_chars: Int64s) -> None:
        """Count the pieces of texts given as `encoded` gives them: split and counted in one
        compiled call. Every return from compiled code waits for the GIL, which the thread that
        reads the texts holds most of the time: one call a batch instead of four took counting
        500 MB on two threads from 5.2-5.5 s to 4.4-4.6 s."""
        index, rows = _table()
        at = np.zeros(1, dtype=np.int64)
        status, padded, ends, codes = _split_and_counted(data, index, rows, text_chars, self.preset, at,
                                                         *self._work.room(len(data)), *self._table())
        self._count_rest(status, padded, ends, codes, _ONCE, at)

    def add_counts(self, counts: Counts) -> None:
        """Add counts as `arrays()` gives them (another counter's, say)."""
        lengths, seen, data = counts
        padded, ends, weights = piece_table.padded(data), np.cumsum(lengths), np.ascontiguousarray(seen, dtype=np.int64)
        codes, at = piece_table.codes(padded, ends), np.zeros(1, dtype=np.int64)
        self._count_rest(piece_table.count(padded, ends, codes, weights, at, *self._table()), padded, ends, codes,
                         weights, at)

    def _table(self) -> tuple[Int64s, npt.NDArray[np.int32], Int64s, Uint8s, Int64s]:
        # The hash table's arrays, as `piece_table.count` takes them.
        return self._rows, self._numbers, self._starts, self._keys, self._sizes

    def _count_rest(self, status: int, padded: Uint8s, ends: Int64s, codes: Int64s, weights: Int64s,
                    at: Int64s) -> None:
        # While the table was full at piece at[0] of the batch: grow it and count on from there.
        while status == piece_table.ROOM:
            self._grow(len(padded) - int(ends[at[0] - 1] if at[0] else 0))
            status = piece_table.count(padded, ends, codes, weights, at, *self._table())

    def _grow(self, bytes_left: int) -> None:
        # Twice the slots, or twice the numbers, or room for the bytes of the batch still to count.
        pieces, key_bytes = int(self._sizes[0]), int(self._sizes[1])
        if 2 * (pieces + 1) > len(self._numbers):
            self._rows, self._numbers = piece_table.rehashed(self._rows, self._numbers, 2 * len(self._numbers))
        if pieces + 1 >= len(self._starts):
            self._starts = _resized(self._starts, 2 * len(self._starts) - 1)
        if key_bytes + bytes_left + piece_table.WORD > len(self._keys):
            self._keys = _resized(self._keys, max(2 * len(self._keys), key_bytes + bytes_left + piece_table.WORD))

    def arrays(self) -> Counts:
        """Each piece's length in bytes and its count, and their bytes end to end, in the order first seen."""
        pieces, key_bytes = int(self._sizes[0]), int(self._sizes[1])
        return (np.diff(self._starts[:pieces + 1]), piece_table.counts_by_number(self._rows, self._numbers, pieces),
                self._keys[:key_bytes].copy())

    def counter(self) -> Counter[str]:
        """The counts as `spills.count` gives them."""
        lengths, counts, data = self.arrays()
        if not len(lengths):
            return Counter()
        text = data.tobytes().decode("utf-8", "surrogatepass")
        # Where each piece ends in characters: the bytes up to its end that do not continue a character.
        heads = np.cumsum((data & 0xC0) != 0x80)
        ends = heads[np.cumsum(lengths) - 1].tolist()
        counter: Counter[str] = Counter()
        dict.update(counter, zip([text[first:last] for first, last in zip([0, *ends], ends)], counts.tolist()))
        return counter


_ONCE = np.zeros(0, dtype=np.int64)  # no weights: each piece seen once


class _Work:
    """What splitting a batch writes besides the table (`_split_and_counted`), kept from batch to
    batch. Allocated anew for each batch, with large blocks mapped apart (`map_large_blocks`),
    they were mapped and faulted in again a hundred times a second: counting 100 MB of mixed text
    took 2.5-3.0 s instead of 2.1-2.4 s."""

    def __init__(self) -> None:
        self.size = -1

    def room(self, size: int) -> tuple[Uint8s, npt.NDArray[np.uint16], Int64s, Int64s, Int64s]:
        """The arrays, with room for a batch of `size` bytes (a character, a piece per byte at most):
        the padded copy, each character's class and offset, each piece's end and code."""
        if size > self.size:
            self.size = size + size // 4  # room for the next batches' sizes, untouched (so not resident) until used
            self.arrays = _work_arrays(self.size)
        return self.arrays


@njit(cache=True, nogil=True)
def _work_arrays(size: int) -> tuple[Uint8s, npt.NDArray[np.uint16], Int64s, Int64s, Int64s]:
    # `_Work`'s arrays, allocated here rather than by numpy, which asks the kernel for huge pages
    # for large arrays: 2 MiB resident as soon as one byte of one is written, and these are
    # written only as far as the batch reaches (15 MiB more at the peak of counting the mix).
    return (np.empty(size + piece_table.WORD, dtype=np.uint8), np.empty(size, dtype=np.uint16),
            np.empty(size + 1, dtype=np.int64), np.empty(size, dtype=np.int64), np.empty(size, dtype=np.int64))


@njit(cache=True, nogil=True)
def _split_and_counted(data: Uint8s, index: npt.NDArray[np.int32], rows: npt.NDArray[np.uint16], text_chars: Int64s,
                       preset: int, at: Int64s, padded: Uint8s, classes: npt.NDArray[np.uint16], offsets: Int64s,
                       ends: Int64s, codes: Int64s, table_rows: Int64s, numbers: npt.NDArray[np.int32],
                       starts: Int64s, keys: Uint8s, sizes: Int64s) -> tuple[int, Uint8s, Int64s, Int64s]:
    # A batch's pieces (`scanner.decode`, then `scanner.scan`) counted into a PieceCounter's
    # table from piece at[0] on (`piece_table.count`), written into its `_Work` arrays. Returns
    # its status (DONE, or ROOM: the table is full at piece at[0]) and what counting the rest
    # takes: the bytes padded for the compiled loops, where each piece ends, and each one's code.
    padded = piece_table.padded_into(data, padded)
    characters = scanner.decode(data, index, rows, classes, offsets)
    ends = ends[:scanner.scan(classes[:characters], offsets[:characters + 1], text_chars, preset, ends)]
    codes = piece_table.codes_into(padded, ends, codes)
    status = piece_table.count(padded, ends, codes, _ONCE, at, table_rows, numbers, starts, keys, sizes)
    return status, padded, ends, codes


def _resized(values: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    bigger = np.zeros(size, dtype=values.dtype)
    bigger[:len(values)] = values
    return bigger


def counted(documents: Iterable[str], preset: str) -> PieceCounter:
    """The preset's pieces of the documents, counted a batch (`text_frames.batches`) at a time."""
    counter = PieceCounter(preset)
    for batch in batches(documents):
        counter.add(batch)
    return counter


def counted_frames(found: Iterable[bytes], preset: str) -> PieceCounter:
    """The preset's pieces of the texts `text_frames.write_texts` wrote, counted from its frames
    as they are (each batch's lengths, then its UTF-8): no str is made of them."""
    counter = PieceCounter(preset)
    found = iter(found)
    for lengths in found:
        data = np.frombuffer(next(found), dtype=np.uint8)
        counter.add_utf8(data, np.frombuffer(lengths, dtype=np.uint32).astype(np.int64))
    return counter


def counted_in_threads(documents: Iterable[str], preset: str, threads: int) -> Counts:
    """The preset's pieces of the documents counted by `threads` threads of this process (the
    compiled loops release the GIL; this thread reads the documents meanwhile), their tables
    added up into one at the end: its `arrays()`."""
    queue: Queue[list[str] | None] = Queue(maxsize=threads)
    counters = [PieceCounter(preset) for _ in range(max(1, threads))]
    failed: list[BaseException] = []

    def work(counter: PieceCounter) -> None:
        try:
            while (batch := queue.get()) is not None:
                counter.add(batch)
        except BaseException as exc:
            failed.append(exc)
            while queue.get() is not None:  # keep taking batches, so the reader never blocks on a full queue
                pass

    workers = [Thread(target=work, args=(counter,), daemon=True, name="tokenmill-split") for counter in counters]
    for worker in workers:
        worker.start()
    try:
        for batch in batches(documents):
            queue.put(batch)
            if failed:
                break
    finally:
        for _ in workers:
            queue.put(None)
        for worker in workers:
            worker.join()
    if failed:
        raise failed[0]
    total = counters.pop(0)
    while counters:
        total.add_counts(counters.pop().arrays())
    return total.arrays()


def warm_up() -> None:
    """Compile (or load from numba's cache) every compiled loop now, each preset's, the table's
    growth too: a process that counts calls this before it forks, or before it is timed."""
    words = [" ".join(_letters(n) for n in range(at, at + 1000)) for at in range(0, 40_000, 1000)]
    for preset in NUMBERS:
        counter = counted(words, preset)
        counter.counter()
        split_all(words[:1], preset)


def _letters(n: int) -> str:
    out = ""
    while True:
        n, digit = divmod(n, 26)
        out += chr(ord("a") + digit)
        if not n:
            return out


def count(documents: Iterable[str], split: spills.Split) -> Counter[str]:
    """`spills.count(documents, split)`, compiled when the split is a preset's (`compiled_preset`)."""
    preset = compiled_preset(split)
    if preset is None:
        return spills.count(documents, split)
    return counted(documents, preset).counter()
