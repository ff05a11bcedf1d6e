"""Byte-level BPE merges learned from counted pieces (distinct pre-tokenized pieces and how often
each was seen), compiled with numba.

The rule is rustbpe's (karpathy/rustbpe `train_core_incremental`), so the same counts give the
same merges as rustbpe training on the texts they were counted from: pieces start as their
UTF-8 bytes (ids 0..255); every adjacent pair of a piece counts the piece's count (overlaps
too: "aaa" holds (a, a) twice); the most frequent pair is merged next, a tie going to the
smaller pair (left id, then right id); a merge replaces its pair left to right, without
overlap, in every piece that holds it, and takes the next id (256, 257, ...). Learning stops at
the number of merges asked for, or when no pair is left.

Pair counts are kept exact and incremental: a merge visits only the pieces that hold its pair
(each pair's pieces are listed once, when the newer of its two tokens is made, as no later
merge can make that pair anywhere else), and a max-heap with lazy refresh (a stale count is
put back with its current value) finds the next pair.
"""

from array import array
from collections.abc import Iterable, MutableMapping
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from numba import njit, types
from numba.typed import Dict

BYTES = 256
SHIFT = np.int64(32)

# The Python-level types of what numba compiles (all int64 there, but the int32 arrays):
I64 = int | np.int64
Symbol = int | np.int32  # a token id
Pairs = MutableMapping[np.int64, I64]  # a numba typed Dict by pair key: counts, or runs of `where`
Heap = list[tuple[I64, np.int64]]  # (negated count, pair key)
Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]
Scalar = TypeVar("Scalar", bound=np.generic)


def learn_merges(pieces: Iterable[tuple[bytes, int]], merges: int) -> list[bytes]:
    """Every token's bytes in rank order: the 256 single bytes, then one per merge learned
    (at most `merges`), from (piece, count) pairs (each piece once)."""
    lengths, counts, data = array("q"), array("q"), bytearray()  # compact: millions of pieces
    for piece, count in pieces:
        if len(piece) >= 2 and count > 0:  # a single byte holds no pair
            data += piece
            lengths.append(len(piece))
            counts.append(count)
    symbols = np.frombuffer(data, dtype=np.uint8).astype(np.int32)
    del data
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(lengths, dtype=np.int64), out=starts[1:])
    pairs = _learn(symbols, starts, np.frombuffer(counts, dtype=np.int64).copy(), max(merges, 0))
    tokens = [bytes([byte]) for byte in range(BYTES)]
    for left, right in pairs:
        tokens.append(tokens[left] + tokens[right])
    return tokens


def warm_up() -> None:
    """Compile (or load from numba's cache) the learner now: a worker calls this before it forks
    its children, which then never pay for compiling (seconds, and 100 MiB at its peak)."""
    learn_merges([(b"warm up", 2), (b"up", 1)], 2)


@njit(cache=True, nogil=True)
def _key(left: Symbol, right: Symbol) -> np.int64:
    return (np.int64(left) << SHIFT) | np.int64(right)


@njit(cache=True, nogil=True)  # the job's heartbeat thread beats while it learns
def _learn(symbols: Int32s, starts: Int64s, counts: Int64s, wanted: int) -> list[tuple[Symbol, Symbol]]:
    words = len(counts)
    ends = starts[1:].copy()  # each piece's symbols are symbols[starts[w]:ends[w]], shrinking as it merges
    pair_counts = Dict.empty(key_type=types.int64, value_type=types.int64)
    # Each pair's pieces: a run of `where` from where_start[pair], where_length[pair] long.
    where_start = Dict.empty(key_type=types.int64, value_type=types.int64)
    where_length = Dict.empty(key_type=types.int64, value_type=types.int64)

    # The initial pairs, and for each the pieces holding it (each piece once per pair), filed
    # by a counting sort: one int32 per pair occurrence, nothing more.
    last = Dict.empty(key_type=types.int64, value_type=types.int64)  # the last piece seen holding each pair
    for w in range(words):
        for i in range(starts[w], ends[w] - 1):
            key = _key(symbols[i], symbols[i + 1])
            pair_counts[key] = pair_counts.get(key, 0) + counts[w]
            if last.get(key, -1) != w:
                last[key] = w
                where_length[key] = where_length.get(key, 0) + 1
    used = 0
    for key, length in where_length.items():
        where_start[key] = used
        used += length
    where = np.empty(max(used, 16), dtype=np.int32)
    filled = Dict.empty(key_type=types.int64, value_type=types.int64)
    for key, first in where_start.items():
        filled[key] = first
    last = Dict.empty(key_type=types.int64, value_type=types.int64)
    for w in range(words):
        for i in range(starts[w], ends[w] - 1):
            key = _key(symbols[i], symbols[i + 1])
            if last.get(key, -1) != w:
                last[key] = w
                where[filled[key]] = w
                filled[key] += 1
    last = Dict.empty(key_type=types.int64, value_type=types.int64)  # freed: both are done
    filled = Dict.empty(key_type=types.int64, value_type=types.int64)

    heap: Heap = [(np.int64(0), np.int64(0))]
    heap.pop()
    for key, count in pair_counts.items():
        heap.append((-count, key))
    _heapify(heap)

    merged: list[tuple[Symbol, Symbol]] = []
    new_keys = np.empty(64, dtype=np.int64)
    new_owners = np.empty(64, dtype=np.int32)
    while len(merged) < wanted and len(heap) > 0:
        negative, key = _heappop(heap)
        current = pair_counts.get(key, 0)
        if current <= 0:
            continue
        if current != -negative:
            _heappush(heap, (-current, key))
            continue
        new_id = BYTES + len(merged)
        left = np.int32(key >> SHIFT)
        right = np.int32(key & 0xFFFFFFFF)
        merged.append((left, right))
        made = 0
        first = where_start[key]
        for p in range(first, first + where_length[key]):  # each piece once (filed so)
            w = where[p]
            room = made + 2 * (ends[w] - starts[w])  # at most two new pairs per symbol
            if room > len(new_keys):
                # numba's Dispatcher stub loses a generic function's type variable (its parameters become Never).
                new_keys = _grown_to(new_keys, 2 * room)  # type: ignore[arg-type]
                new_owners = _grown_to(new_owners, 2 * room)  # type: ignore[arg-type]
            made = _merge_in(symbols, starts[w], ends, w, counts[w], left, right, new_id, pair_counts,
                             new_keys, new_owners, made)
        if made:
            if used + made > len(where):
                where = _grown_to(where, used + made + len(where) // 4)  # type: ignore[arg-type]  # as above
            used = _file_and_queue(new_keys, new_owners, made, where, used, where_start, where_length, pair_counts,
                                   heap)
    return merged


@njit(cache=True, nogil=True)
def _merge_in(symbols: Int32s, start: I64, ends: Int64s, w: int, count: I64, left: np.int32, right: np.int32,
              new_id: int, pair_counts: Pairs, new_keys: Int64s, new_owners: Int32s, made: int) -> int:
    # Replace (left, right) by new_id in piece w, left to right, updating the pair counts as
    # rustbpe does; the pairs made with new_id are listed (key, piece) at new_keys[made:].
    end = ends[w]
    out = start
    i = start
    while i < end:
        if i + 1 < end and symbols[i] == left and symbols[i + 1] == right:
            if out > start:
                before = symbols[out - 1]
                _add(pair_counts, _key(before, left), -count)
                made = _listed(new_keys, new_owners, made, _key(before, new_id), w)
                _add(pair_counts, _key(before, new_id), count)
            _add(pair_counts, _key(left, right), -count)
            if i + 2 < end:
                after = symbols[i + 2]
                _add(pair_counts, _key(right, after), -count)
                made = _listed(new_keys, new_owners, made, _key(new_id, after), w)
                _add(pair_counts, _key(new_id, after), count)
            symbols[out] = new_id
            out += 1
            i += 2
        else:
            symbols[out] = symbols[i]
            out += 1
            i += 1
    ends[w] = out
    return made


@njit(cache=True, nogil=True)
def _add(pair_counts: Pairs, key: np.int64, delta: I64) -> None:
    pair_counts[key] = pair_counts.get(key, 0) + delta


@njit(cache=True, nogil=True)
def _listed(keys: Int64s, owners: Int32s, made: int, key: np.int64, w: int) -> int:
    keys[made] = key
    owners[made] = w
    return made + 1


@njit(cache=True, nogil=True)
def _file_and_queue(keys: Int64s, owners: Int32s, n: int, where: Int32s, used: int, where_start: Pairs,
                    where_length: Pairs, pair_counts: Pairs, heap: Heap) -> int:
    # Group the (pair, piece) entries of the pairs a merge made by pair (pieces in order, each
    # once) into `where`, and put each pair on the heap with its count.
    order = np.argsort(keys[:n], kind="mergesort")  # stable: each piece's entries stay together
    last_key = np.int64(-1)
    last_owner: I64 = np.int64(-1)
    for j in order:
        key = keys[j]
        owner = owners[j]
        if key != last_key:
            where_start[key] = used
            where_length[key] = 0
            last_key = key
            last_owner = -1
            count = pair_counts.get(key, 0)
            if count > 0:
                _heappush(heap, (-count, key))
        if owner != last_owner:
            where[used] = owner
            used += 1
            where_length[key] += 1
            last_owner = owner
    return used


@njit(cache=True, nogil=True)
def _grown_to(array: npt.NDArray[Scalar], size: int) -> npt.NDArray[Scalar]:
    bigger = np.empty(size, dtype=array.dtype)
    bigger[:len(array)] = array
    return bigger


# A binary min-heap of (negated count, pair key) tuples: the top is the most frequent pair,
# a tie going to the smaller key, which is the smaller (left, right).
@njit(cache=True, nogil=True)
def _heapify(heap: Heap) -> None:
    for i in range(len(heap) // 2 - 1, -1, -1):
        _sift_down(heap, i)


@njit(cache=True, nogil=True)
def _heappush(heap: Heap, item: tuple[I64, np.int64]) -> None:
    heap.append(item)
    i = len(heap) - 1
    while i > 0:
        parent = (i - 1) // 2
        if heap[i] < heap[parent]:
            heap[i], heap[parent] = heap[parent], heap[i]
            i = parent
        else:
            break


@njit(cache=True, nogil=True)
def _heappop(heap: Heap) -> tuple[I64, np.int64]:
    top = heap[0]
    last = heap.pop()
    if len(heap) > 0:
        heap[0] = last
        _sift_down(heap, 0)
    return top


@njit(cache=True, nogil=True)
def _sift_down(heap: Heap, i: int) -> None:
    size = len(heap)
    while True:
        smallest = i
        left = 2 * i + 1
        right = left + 1
        if left < size and heap[left] < heap[smallest]:
            smallest = left
        if right < size and heap[right] < heap[smallest]:
            smallest = right
        if smallest == i:
            return
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest
