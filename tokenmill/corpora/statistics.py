"""Corpus statistics computed at upload (DESIGN §6), streamed one line at a time.

Words are counted the way the first seed article counts them: the line lowercased and cut
on whitespace (``line.lower().split()``), punctuation included and no per-character rule
for Chinese or Thai; those are `tokenmill.corpora.words`' business, for fertility. From the word
counts come the distinct words, the hapax share, Zipf's exponent, Heaps' K and β and the
out-of-vocabulary rate of the last tenth of the lines under the first nine tenths.

Each line is also hashed (`tokenmill.corpora.hashes`) to count the exact duplicates: lines
whose whole text is that of an earlier line. The distinct hashes, sorted, are what the team's
figure across corpora is merged from (tokenmill.corpora.duplicates).

Memory: one Counter entry per distinct word, ~100 bytes plus the word itself (about
0.6 GB for 5 million distinct words), 8 bytes per distinct line for its hash (twice that
while the sorted runs merge), and, when the line count is not given, 16 bytes per line for
at most the last fifth of the lines; nothing else grows with the corpus.

Deliberately not handled: normalisation, sampling or approximation (every word is
counted exactly), and fitting anything but straight lines in log-log space.
"""

from __future__ import annotations

import itertools
from array import array
from collections import Counter

import numpy as np

from tokenmill.corpora.hashes import HASH_BATCH, SeenDocuments, document_hash

# Heaps' curve is sampled whenever the words read pass the next point of a geometric
# series, 16 points per doubling: every scale weighs the same in the fit, as on the plot.
_HEAPS_STEP = 2 ** (1 / 16)
# Zipf's exponent is fitted on ranks spaced evenly in log rank, up to this many: fitting
# every rank would let the hapax plateau, half the ranks, outweigh the whole head.
_ZIPF_FIT_POINTS = 1000


def _head_lines(lines: int) -> int:
    """Return how many lines make the first nine tenths; the last tenth rounds down."""
    return lines - lines // 10


class CorpusStatistics:
    """Streaming word statistics of one corpus, and its exact-duplicate lines; `add` each line
    (document) in order.

    With `total_lines`, the OOV split is fixed up front and `result` refuses to run
    before exactly that many lines were added; without it, any prefix can be measured.
    """

    def __init__(self, total_lines: int | None = None) -> None:
        # Insertion order is first appearance, so "words first seen after line n" are the
        # entries past position distinct(n): no per-word line number needs storing.
        self._counts: Counter[str] = Counter()
        self._lines = 0
        self._words = 0
        self._heaps: list[tuple[int, int]] = []
        self._next_sample = 1.0
        self._total_lines = total_lines
        self._seen = SeenDocuments()  # the distinct lines' hashes
        self._unlooked: list[int] = []  # hashes of the last lines, looked up a batch at a time
        self._duplicates = 0
        if total_lines is not None:
            # The split is known: keep (words read, distinct) as the head's last line ends.
            self._head = _head_lines(total_lines)
            self._at_head = (0, 0)
        else:
            # Unknown split: keep (words read, distinct) after every line from the earliest
            # line the final split can still fall on; _base is the line count of entry 0.
            self._base = 0
            self._words_after = array("q", [0])
            self._distinct_after = array("q", [0])

    def add(self, text: str) -> None:
        """Count the words of one line of the corpus, and whether it repeats an earlier line."""
        self._unlooked.append(document_hash(text))
        if len(self._unlooked) == HASH_BATCH:
            self._look_up()
        words = text.lower().split()
        self._counts.update(words)
        self._lines += 1
        self._words += len(words)
        if self._words >= self._next_sample:
            self._heaps.append((self._words, len(self._counts)))
            while self._next_sample <= self._words:
                self._next_sample *= _HEAPS_STEP
        if self._total_lines is not None:
            if self._lines == self._head:
                self._at_head = (self._words, len(self._counts))
        else:
            self._remember_line()

    def _look_up(self) -> None:
        """Count the pending lines already seen (earlier, or earlier in the batch); remember the rest."""
        if self._unlooked:
            fresh = self._seen.first_seen(np.array(self._unlooked, dtype=np.uint64))
            self._duplicates += len(fresh) - int(np.count_nonzero(fresh))
            self._unlooked = []

    def document_hashes(self) -> np.ndarray:
        """The distinct lines' hashes, ascending, as uint64 (`tokenmill.corpora.hashes`)."""
        self._look_up()
        return self._seen.sorted()

    def _remember_line(self) -> None:
        """Record the state after this line and forget lines the split can no longer hit."""
        self._words_after.append(self._words)
        self._distinct_after.append(len(self._counts))
        # The split only moves forward as lines arrive, so entries before the current
        # split are dead; dropping them in halves keeps the deletion cost amortised.
        dead = _head_lines(self._lines) - self._base
        if dead > len(self._words_after) // 2:
            del self._words_after[:dead]
            del self._distinct_after[:dead]
            self._base += dead

    def result(self) -> dict[str, float | int]:
        """Return the §6 corpus statistics of the lines added so far; no lines give zeros."""
        frequencies = self._frequencies()
        distinct = len(frequencies)
        zipf = _fit_loglog(_points_at(frequencies, _ZIPF_FIT_POINTS))
        heaps = _fit_loglog(self.heaps_points(max_points=None))
        return {
            "distinct_words": distinct,
            "hapax_share": _share(int(np.count_nonzero(frequencies == 1)), distinct),
            # Frequency falls with rank: the slope is negative, the exponent its opposite.
            "zipf_exponent": 0.0 - zipf[0] if zipf else 0.0,
            "heaps_k": float(np.exp(heaps[1])) if heaps else 0.0,
            "heaps_beta": heaps[0] if heaps else 0.0,
            "oov_rate": self._oov_rate(),
            **self._duplicate_counts(),
        }

    def _duplicate_counts(self) -> dict[str, float | int]:
        """The lines whose exact text is an earlier line's, and their share of all lines."""
        self._look_up()
        return {"duplicate_documents": self._duplicates, "duplicate_share": _share(self._duplicates, self._lines)}

    def _oov_rate(self) -> float:
        """Return the share of the last tenth's words absent from the first nine tenths."""
        if self._total_lines is not None:
            if self._lines != self._total_lines:
                raise ValueError(
                    f"told {self._total_lines} lines but {self._lines} were added"
                )
            head_words, head_distinct = self._at_head
        else:
            index = _head_lines(self._lines) - self._base
            head_words = self._words_after[index]
            head_distinct = self._distinct_after[index]
        # A word first seen in the tail has all its occurrences there: its whole count is
        # out of vocabulary, and those words are exactly the entries past head_distinct.
        oov = sum(itertools.islice(self._counts.values(), head_distinct, None))
        return _share(oov, self._words - head_words)

    def zipf_points(self, max_points: int | None = 200) -> list[tuple[int, int]]:
        """Return (rank, frequency) pairs at log-spaced ranks, for a log-log plot."""
        return _points_at(self._frequencies(), max_points)

    def _frequencies(self) -> np.ndarray:
        """Return the word frequencies in descending order: index 0 is rank 1."""
        frequencies = np.fromiter(self._counts.values(), dtype=np.int64, count=len(self._counts))
        return np.sort(frequencies)[::-1]

    def heaps_points(self, max_points: int | None = 200) -> list[tuple[int, int]]:
        """Return (words read, distinct words) pairs, geometrically spaced, for a log-log plot."""
        points = list(self._heaps)
        if points and points[-1][0] < self._words:
            points.append((self._words, len(self._counts)))  # end where the corpus ends
        # The samples are already geometric in words read, so thinning them evenly by index
        # keeps them geometric.
        keep = _log_spaced(len(points), max_points, linear=True)
        return [points[i - 1] for i in keep]


def _share(part: int, whole: int) -> float:
    """Return part / whole, or 0.0 for an empty whole."""
    return part / whole if whole else 0.0


def _points_at(frequencies: np.ndarray, max_points: int | None) -> list[tuple[int, int]]:
    """Return (rank, frequency) at up to `max_points` ranks spaced evenly in log rank."""
    ranks = _log_spaced(len(frequencies), max_points)
    return [(int(rank), int(frequencies[rank - 1])) for rank in ranks]


def _log_spaced(n: int, max_points: int | None, *, linear: bool = False) -> np.ndarray:
    """Return up to `max_points` distinct positions in 1..n, spaced in log (or linearly)."""
    if max_points is None or n <= max_points:
        return np.arange(1, n + 1)
    spaced = np.linspace(1, n, max_points) if linear else np.geomspace(1, n, max_points)
    return np.unique(np.round(spaced).astype(np.int64))


def _fit_loglog(points: list[tuple[int, int]]) -> tuple[float, float] | None:
    """Return the least-squares slope and intercept of log y on log x, None if undefined."""
    if len({x for x, _ in points}) < 2:
        return None
    x = np.log(np.array([p[0] for p in points], dtype=np.float64))
    y = np.log(np.array([p[1] for p in points], dtype=np.float64))
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope) + 0.0, float(intercept) + 0.0
