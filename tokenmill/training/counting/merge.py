"""Merged counts gathered within a memory budget (`counting: distributed`; superword spans).

What must fit the job's memory is not the corpus but the distinct pieces the learner reads
(tokenmill.training.merge_learner holds about `PIECE_BYTES` a piece and `BYTE_BYTES` a byte of
it: its peak above its inputs, 32k merges, was 228 MiB for 0.89 million pieces of 16.8 MB and
113 MiB for 0.50 million of 8.0 MB). The merged counts stream in, in piece order, and are kept
in compact arrays; pieces seen fewer than `min_count` times are left out, as before. When the
kept pieces would no longer fit the budget, the threshold doubles and the pieces under it are
dropped from what is kept, again until they fit; a piece that arrives later is kept only at the
threshold reached. Since the threshold only rises, what is left is exactly the pieces seen at
least the final threshold times: the pruning a run with that `min_frequency` would make,
whatever the order of the pieces. `Pruned` says what it cost: the threshold, the pieces dropped
and their share of all occurrences. Only when a single piece's worth cannot fit does it fail.
`fitted` applies the same rule (`_fit`) to counts already held as arrays (SuperBPE's spans).
"""

from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil

from tokenmill.errors import TokenmillError

LEARNER_SHARE = 0.8  # of the memory the job's cap leaves its process when the counts are gathered
PIECE_BYTES = 72  # the learner's memory a distinct piece (its arrays, hashes, pair tables)
BYTE_BYTES = 12  # and a byte of it
Counts = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint8]]  # lengths, counts, bytes


@dataclass
class Pruned:
    """What the merged counts kept and left out: pieces and occurrences."""

    threshold: int  # pieces seen fewer times were left out (min_frequency, or raised to fit)
    min_count: int  # what the spec asked for
    kept: int = 0
    dropped: int = 0  # distinct pieces under the threshold
    occurrences: int = 0  # of every piece, kept or not
    dropped_occurrences: int = 0

    @property
    def raised(self) -> bool:
        """Whether the budget raised the threshold above the spec's."""
        return self.threshold > self.min_count

    def record(self) -> dict[str, Any]:
        """The lineage's `pruned`."""
        return {"threshold": self.threshold, "min_frequency": self.min_count, "raised": self.raised,
                "pieces_kept": self.kept, "pieces_dropped": self.dropped,
                "dropped_share": round(self.dropped_occurrences / max(self.occurrences, 1), 6)}


def learner_budget(max_memory: int | None) -> int | None:
    """What the gathered counts may take of a job's memory cap (None: no cap): most of what this
    process does not hold yet."""
    if max_memory is None:
        return None
    return int(LEARNER_SHARE * max(max_memory - psutil.Process().memory_info().rss, 0))


def cost(pieces: int, data_bytes: int) -> int:
    """About what the learner needs for this many distinct pieces of this many bytes in all."""
    return PIECE_BYTES * pieces + BYTE_BYTES * data_bytes


class _Kept:
    """The kept pieces in compact arrays: each one's length and count, their bytes end to end."""

    def __init__(self) -> None:
        self.lengths, self.counts, self.data = array("q"), array("q"), bytearray()

    @classmethod
    def of(cls, counts: Counts) -> "_Kept":
        kept = cls()
        lengths, seen, data = counts
        kept.lengths.frombytes(lengths.astype(np.int64).tobytes())
        kept.counts.frombytes(seen.astype(np.int64).tobytes())
        kept.data = bytearray(data.tobytes())
        return kept

    def add(self, piece: bytes, count: int) -> None:
        self.lengths.append(len(piece))
        self.counts.append(count)
        self.data += piece

    def cost(self) -> int:
        return cost(len(self.lengths), len(self.data))

    def views(self) -> Counts:
        return (np.frombuffer(self.lengths, dtype=np.int64), np.frombuffer(self.counts, dtype=np.int64),
                np.frombuffer(self.data, dtype=np.uint8))

    def keep_at_least(self, threshold: int) -> tuple[int, int]:
        """Drop the pieces seen fewer than `threshold` times; returns how many, and their occurrences."""
        lengths, counts, data = self.views()
        keep = counts >= threshold
        dropped, occurrences = int((~keep).sum()), int(counts[~keep].sum())
        kept_data = data[np.repeat(keep, lengths)].tobytes()
        kept_lengths, kept_counts = lengths[keep].tobytes(), counts[keep].tobytes()
        del lengths, counts, data  # views of the arrays about to be replaced
        self.lengths, self.counts = array("q", b""), array("q", b"")
        self.lengths.frombytes(kept_lengths)
        self.counts.frombytes(kept_counts)
        self.data = bytearray(kept_data)
        return dropped, occurrences


def fitted(counts: Counts, min_count: int, budget: int | None) -> tuple[Counts, Pruned]:
    """`gathered` of counts already held as arrays (each distinct piece once), by the same rule."""
    pruned = Pruned(threshold=max(min_count, 1), min_count=max(min_count, 1), occurrences=int(counts[1].sum()))
    kept = _Kept.of(counts)
    _drop_under(kept, pruned)
    _fit(kept, pruned, budget)
    pruned.kept = len(kept.lengths)
    return kept.views(), pruned


def _fit(kept: _Kept, pruned: Pruned, budget: int | None) -> None:
    """Double the threshold, dropping the pieces under it, until the kept ones fit `budget`."""
    while budget is not None and kept.cost() > budget:
        if len(kept.lengths) <= 1:
            raise _over_budget(budget, pruned.threshold)
        pruned.threshold *= 2
        _drop_under(kept, pruned)


def _drop_under(kept: _Kept, pruned: Pruned) -> None:
    dropped, occurrences = kept.keep_at_least(pruned.threshold)
    pruned.dropped += dropped
    pruned.dropped_occurrences += occurrences


def _over_budget(budget: int, threshold: int) -> TokenmillError:
    return TokenmillError(f"the merged counts do not fit the job's memory ({budget >> 20} MiB for the "
                          f"learner) even keeping only pieces seen {threshold:,} times or more")


def gathered(counted: Iterable[tuple[bytes, int]], min_count: int, budget: int | None) -> tuple[Counts, Pruned]:
    """The pieces seen at least `min_count` times, or more if that is what fits `budget` bytes
    of the learner's memory (None: no budget), as arrays; and what was left out."""
    pruned = Pruned(threshold=max(min_count, 1), min_count=max(min_count, 1))
    kept = _Kept()
    for piece, count in counted:
        pruned.occurrences += count
        if count < pruned.threshold:
            pruned.dropped += 1
            pruned.dropped_occurrences += count
            continue
        kept.add(piece, count)
        _fit(kept, pruned, budget)
    pruned.kept = len(kept.lengths)
    return kept.views(), pruned
