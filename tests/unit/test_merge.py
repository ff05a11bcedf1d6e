"""Merged counts within a memory budget (issue 22.5): what is kept is exactly the pieces at the
final threshold, within the budget, and what was left out is counted."""

import random

import numpy as np
import pytest

from tokenmill.errors import TokenmillError
from tokenmill.training.counting.merge import cost, gathered


def pieces(n: int, seed: int = 0) -> list[tuple[bytes, int]]:
    # Zipf-like counts: most pieces rare, a few frequent, as a corpus's pieces are.
    rng = random.Random(seed)
    return sorted((f"piece{i}".encode() * rng.randrange(1, 4), max(1, int(1000 / rng.randrange(1, 2000) ** 0.8)))
                  for i in range(n))


def as_list(counts) -> list[tuple[bytes, int]]:
    lengths, seen, data = counts
    ends = np.cumsum(lengths)
    return [(data[end - length:end].tobytes(), int(count)) for length, end, count in zip(lengths, ends, seen)]


def test_without_a_budget_it_keeps_what_min_frequency_keeps():
    given = pieces(2000)
    counts, pruned = gathered(iter(given), 2, None)
    assert as_list(counts) == [(p, c) for p, c in given if c >= 2]
    assert (pruned.threshold, pruned.raised, pruned.kept) == (2, False, sum(c >= 2 for _, c in given))
    assert pruned.dropped_occurrences == sum(c for _, c in given if c < 2)


@pytest.mark.parametrize("share", [0.5, 0.1, 0.01])
def test_a_budget_keeps_exactly_the_pieces_at_the_threshold_it_reached(share):
    given = pieces(5000, seed=int(share * 100))
    everything = cost(len(given), sum(len(p) for p, _ in given))
    budget = int(share * everything)
    counts, pruned = gathered(iter(given), 1, budget)
    kept = [(p, c) for p, c in given if c >= pruned.threshold]
    assert pruned.raised and as_list(counts) == kept
    assert cost(len(kept), sum(len(p) for p, _ in kept)) <= budget
    assert (pruned.kept, pruned.dropped) == (len(kept), len(given) - len(kept))
    assert pruned.occurrences == sum(c for _, c in given)
    assert pruned.dropped_occurrences == sum(c for _, c in given if c < pruned.threshold)
    record = pruned.record()
    assert record["raised"] and 0 < record["dropped_share"] < 1


def test_a_budget_no_piece_fits_fails_naming_the_threshold():
    with pytest.raises(TokenmillError, match="do not fit the job's memory"):
        gathered(iter([(b"a" * 100, 5), (b"b" * 100, 5)]), 1, 10)


@pytest.mark.parametrize("share", [None, 0.2, 0.02])
def test_counts_held_as_arrays_are_fitted_by_the_same_rule(share):
    from tokenmill.training.counting.merge import fitted

    given = pieces(3000, seed=7)
    budget = None if share is None else int(share * cost(len(given), sum(len(p) for p, _ in given)))
    streamed, by_stream = gathered(iter(given), 4, budget)
    arrays = (np.array([len(p) for p, _ in given], dtype=np.int64), np.array([c for _, c in given], dtype=np.int64),
              np.frombuffer(b"".join(p for p, _ in given), dtype=np.uint8))
    held, by_arrays = fitted(arrays, 4, budget)
    assert as_list(held) == as_list(streamed) and by_arrays == by_stream
    assert by_arrays.raised == (share is not None)
