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

It is all flat arrays, which is what makes it 3-5x faster than rustbpe's own merge loop
(BENCHMARKS.md, "Distributed counting"):
- every pair seen gets the next number from an open-addressing hash table, and its key, count
  and list of pieces live at that index of plain arrays (`_Pairs` below);
- within one merge a neighbour's pairs depend on the neighbour alone, so they are looked up
  once per merge, not once per occurrence;
- the pairs a merge makes all hold the new token, so all were numbered during that merge: they
  are filed by a counting sort over that range of numbers;
- the pieces a merge visits are far apart in memory, so their memory is asked for a few
  pieces ahead (`_prefetch`), and the loop over them calls nothing that takes an array (numba
  would move reference counts, atomically, on every call).
"""

from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

BYTES = 256
SHIFT = np.int64(32)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of key * 2**64 / phi
EMPTY = np.int32(-1)
AHEAD = 4  # pieces ahead of the one being merged whose memory is asked for (4-16 measured: 4 is best)

Symbol = int | np.int32  # a token id
Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]
# Per pair number: keys (left << 32 | right), totals (its count), first and lengths (its run of
# `where`: the pieces that hold it), last (the last piece listed while filing), then the hash
# table (slots: a pair number, or EMPTY) and its size in bits.
Pairs = tuple[Int64s, Int64s, Int64s, Int32s, Int32s, Int32s, int]


def learn_merges(pieces: Iterable[tuple[bytes, int]], merges: int) -> list[tuple[bytes, bytes]]:
    """The merges learned (at most `merges`), in order, each as the bytes of its two tokens,
    from (piece, count) pairs. Merge k makes token 256 + k, after the 256 single bytes."""
    lengths, counts, data = array("q"), array("q"), bytearray()  # compact: millions of pieces
    for piece, count in pieces:
        data += piece
        lengths.append(len(piece))
        counts.append(count)
    return learn_merges_of(np.frombuffer(data, dtype=np.uint8), np.frombuffer(lengths, dtype=np.int64),
                           np.frombuffer(counts, dtype=np.int64), merges)


def learn_merges_of(data: npt.NDArray[np.uint8], lengths: Int64s, counts: Int64s,
                    merges: int) -> list[tuple[bytes, bytes]]:
    """`learn_merges` of pieces given as arrays: their bytes one after the other, each one's
    length in bytes and count. A piece may come more than once (counted by two processes, say):
    its copies are added up first, which changes nothing but the memory and time the learning
    takes (pair counts are sums either way)."""
    usable = (lengths >= 2) & (counts > 0)  # a single byte holds no pair
    lengths, counts, data = added_up(lengths[usable], counts[usable], data[np.repeat(usable, lengths)])
    symbols = data.astype(np.int32)
    del data
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    merged = _learn(symbols, starts, counts, max(merges, 0), BYTES)
    tokens = [bytes([byte]) for byte in range(BYTES)]
    pairs = []
    for left, right in merged:
        pairs.append((tokens[left], tokens[right]))
        tokens.append(tokens[left] + tokens[right])
    return pairs


def added_up(lengths: Int64s, counts: Int64s,
             data: npt.NDArray[np.uint8]) -> tuple[Int64s, Int64s, npt.NDArray[np.uint8]]:
    """Pieces given as arrays (each one's length and count, their bytes end to end), each distinct
    piece once with its copies' counts added up; in no particular order, with no dictionary of
    pieces held meanwhile (hashed, sorted, compared byte for byte)."""
    lengths = lengths.astype(np.int64)
    counts = counts.astype(np.int64)  # a copy, added up into below
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    order = np.lexsort((lengths, _hashes(data, starts)))  # copies of a piece side by side
    firsts = _first_copies(data, starts, order, counts)  # their counts added up into the first
    return lengths[firsts], np.ascontiguousarray(counts[firsts]), data[np.repeat(firsts, lengths)]


def learn_merges_from(symbols: Int32s, lengths: Int64s, counts: Int64s, first_id: int,
                      merges: int) -> list[tuple[int, int]]:
    """Merges learned by the same rule from pieces already given as token ids (a base tokenizer's
    segmentation of each piece, ids below `first_id`): merge k makes token `first_id + k`. Each
    (symbols, length, count) piece must be distinct; the merges come as pairs of ids."""
    usable = (lengths >= 2) & (counts > 0)
    symbols = np.ascontiguousarray(symbols[np.repeat(usable, lengths)], dtype=np.int32)
    lengths = lengths[usable].astype(np.int64)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return _learn(symbols, starts, np.ascontiguousarray(counts[usable], dtype=np.int64), max(merges, 0), first_id)


def warm_up() -> None:
    """Compile (or load from numba's cache) the learner now: a worker calls this before it forks
    its children, which then never pay for compiling (seconds, and 100 MiB at its peak)."""
    learn_merges([(b"warm up", 2), (b"up", 1)], 2)


@njit(cache=True, nogil=True)
def _hashes(data: npt.NDArray[np.uint8], starts: Int64s) -> npt.NDArray[np.uint64]:
    # Each piece's 64-bit FNV-1a hash.
    hashes = np.empty(len(starts) - 1, dtype=np.uint64)
    for w in range(len(hashes)):
        value = np.uint64(0xCBF29CE484222325)
        for i in range(starts[w], starts[w + 1]):
            value = (value ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
        hashes[w] = value
    return hashes


@njit(cache=True, nogil=True)
def _first_copies(data: npt.NDArray[np.uint8], starts: Int64s, order: Int64s, counts: Int64s) -> npt.NDArray[np.bool_]:
    # With the pieces in `order` (equal hash and length side by side), keep the first of each
    # run of equal bytes, its count the run's sum. A piece that only shares a hash with the one
    # before (rare) is kept as it is: a piece may come twice, and the merges are the same.
    keep = np.ones(len(counts), dtype=np.bool_)
    first = order[0] if len(order) else 0
    for k in range(1, len(order)):
        w = order[k]
        length = starts[w + 1] - starts[w]
        same = length == starts[first + 1] - starts[first]
        i = 0
        while same and i < length:
            same = data[starts[w] + i] == data[starts[first] + i]
            i += 1
        if same:
            counts[first] += counts[w]
            keep[w] = False
        else:
            first = w
    return keep


@njit(cache=True, nogil=True)  # the job's heartbeat thread beats while it learns
def _learn(symbols: Int32s, starts: Int64s, counts: Int64s, wanted: int, first_id: int) -> list[tuple[int, int]]:
    # Each piece's start, end and count side by side (one cache line, read on every visit):
    # its symbols are symbols[start:end], the end moving left as it merges.
    pieces = np.empty((len(counts), 3), dtype=np.int64)
    pieces[:, 0] = starts[:-1]
    pieces[:, 1] = starts[1:]
    pieces[:, 2] = counts
    pairs, numbered, where, used = _first_pairs(symbols, pieces)
    keys, totals, first, lengths, last, slots, bits = pairs
    # The heap: (count, key, number) in three arrays, the most frequent pair on top, a tie to the smaller key.
    heap_counts = np.empty(max(numbered, 16), dtype=np.int64)
    heap_keys = np.empty(max(numbered, 16), dtype=np.int64)
    heap_numbers = np.empty(max(numbered, 16), dtype=np.int32)
    queued = 0
    for n in range(numbered):
        if totals[n] > 0:
            heap_counts[queued], heap_keys[queued], heap_numbers[queued] = totals[n], keys[n], n
            queued += 1
    for i in range(queued // 2 - 1, -1, -1):
        _sift_down(heap_counts, heap_keys, heap_numbers, queued, i)

    merged: list[tuple[int, int]] = []
    made_numbers = np.empty(64, dtype=np.int32)  # the pairs a merge makes, each with the piece it is in
    made_owners = np.empty(64, dtype=np.int32)
    neighbours = np.full((first_id + wanted, 6), -1, dtype=np.int32)  # see _merge_run
    while len(merged) < wanted and queued > 0:
        seen, key, n = heap_counts[0], heap_keys[0], heap_numbers[0]
        queued = _pop(heap_counts, heap_keys, heap_numbers, queued)
        current = totals[n]
        if current <= 0:
            continue
        if current != seen:
            queued = _push(heap_counts, heap_keys, heap_numbers, queued, current, key, n)
            continue
        new_id = first_id + len(merged)
        left = np.int32(key >> SHIFT)
        right = np.int32(key & 0xFFFFFFFF)
        merged.append((int(left), int(right)))
        before_merge = numbered
        made = 0
        p, end = first[n], first[n] + lengths[n]
        while True:  # each piece of the pair once (filed so), making room when the next might not fit
            p, made, numbered = _merge_run(symbols, pieces, where, p, end, left, right, new_id, n, slots, bits, keys,
                                           totals, lengths, last, numbered, made_numbers, made_owners, made,
                                           neighbours)
            if p == end:
                break
            span = int(pieces[where[p], 1] - pieces[where[p], 0])
            keys, totals, first, lengths, last, slots, bits = _with_room(
                (keys, totals, first, lengths, last, slots, bits), numbered, numbered + 2 * span)
            if made + 2 * span > len(made_numbers):
                made_numbers = _grown(made_numbers, 2 * (made + 2 * span))
                made_owners = _grown(made_owners, 2 * (made + 2 * span))
        if made == 0:
            continue
        if used + made > len(where):
            where = _grown(where, used + made + len(where) // 4)
        used = _file_made(made_numbers, made_owners, made, before_merge, numbered, first, lengths, last, where, used)
        if queued + numbered - before_merge > len(heap_counts):
            size = 2 * (queued + numbered - before_merge)
            heap_counts, heap_keys = _grown(heap_counts, size), _grown(heap_keys, size)
            heap_numbers = _grown(heap_numbers, size)
        for m in range(before_merge, numbered):
            if totals[m] > 0:
                queued = _push(heap_counts, heap_keys, heap_numbers, queued, totals[m], keys[m], m)
    return merged


@njit(cache=True, nogil=True)
def _first_pairs(symbols: Int32s, pieces: Int64s) -> tuple[Pairs, int, Int32s, int]:
    # The pairs of the pieces as they come: counted, each position's pair number noted, then
    # each pair's pieces filed by a counting sort (each piece once per pair). Returns the pairs,
    # how many are numbered, `where` and how much of it is used.
    capacity = 1 << 16
    pairs: Pairs = (np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64),
                    np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int32),
                    np.empty(capacity, dtype=np.int32), np.full(1 << 17, EMPTY, dtype=np.int32), 17)
    numbered = 0
    numbers = np.empty(len(symbols), dtype=np.int32)
    keys, totals, first, lengths, last, slots, bits = pairs
    for w in range(len(pieces)):
        room = numbered + int(pieces[w, 1] - pieces[w, 0])
        if room > len(keys) or 2 * room > len(slots):
            pairs = _with_room(pairs, numbered, room)
            keys, totals, first, lengths, last, slots, bits = pairs
        for i in range(pieces[w, 0], pieces[w, 1] - 1):
            n = _number(_key(symbols[i], symbols[i + 1]), slots, bits, keys, totals, lengths, last, numbered)
            if n == numbered:
                numbered += 1
            totals[n] += pieces[w, 2]
            if last[n] != w:
                last[n] = w
                lengths[n] += 1
            numbers[i] = n
    used = 0
    for n in range(numbered):
        first[n] = used
        used += lengths[n]
        last[n] = -1
    where = np.empty(max(used + used // 4, 16), dtype=np.int32)
    cursor = first[:numbered].copy()
    for w in range(len(pieces)):
        for i in range(pieces[w, 0], pieces[w, 1] - 1):
            n = numbers[i]
            if last[n] != w:
                last[n] = w
                where[cursor[n]] = w
                cursor[n] += 1
    return pairs, numbered, where, used


@njit(cache=True, nogil=True)
def _merge_run(symbols: Int32s, pieces: Int64s, where: Int32s, p: int, end: int, left: np.int32, right: np.int32,
               new_id: int, pair: int, slots: Int32s, bits: int, keys: Int64s, totals: Int64s, lengths: Int32s,
               last: Int32s, numbered: int, made_numbers: Int32s, made_owners: Int32s, made: int,
               neighbours: Int32s) -> tuple[int, int, int]:
    # Replace (left, right) by new_id in the pieces where[p:end], each left to right, updating
    # the pair counts as rustbpe does, and list the pairs made with new_id (number, piece) from
    # made on; stop at the first piece that might not fit the arrays. Returns (where it
    # stopped, the pairs listed, the numbers used). One call per merge (or per growth).
    # A neighbour x's pairs are numbered once per merge, in neighbours[x]: the merge that filled
    # columns 1-2, the numbers of (x, left) and (x, new_id); then the same for (right, x) and (new_id, x).
    while p < end:
        # The pieces listed are far apart in memory: ask early for the next ones' rows, and
        # for their symbols once their rows are in, or every visit waits on memory twice.
        # (An intrinsic is called without its typing context, which mypy cannot know.)
        if p + 2 * AHEAD < end:
            _prefetch(pieces, 3 * where[p + 2 * AHEAD])  # type: ignore[call-arg]
        if p + AHEAD < end:
            _prefetch(symbols, pieces[where[p + AHEAD], 0])  # type: ignore[call-arg]
        w = where[p]
        start, stop, count = pieces[w, 0], pieces[w, 1], pieces[w, 2]
        room = numbered + 2 * (stop - start)  # at most two new pairs per symbol
        if room > len(keys) or 2 * room > len(slots) or made + 2 * (stop - start) > len(made_numbers):
            break
        p += 1
        i = start
        while i + 1 < stop and not (symbols[i] == left and symbols[i + 1] == right):
            i += 1  # up to the first match nothing moves (and many pieces listed no longer hold the pair)
        out = i
        while i < stop:
            if i + 1 < stop and symbols[i] == left and symbols[i + 1] == right:
                if out > start:
                    before = symbols[out - 1]
                    if neighbours[before, 0] != new_id:
                        numbered = _neighbour(neighbours, before, 0, _key(before, left), _key(before, new_id), new_id,
                                              slots, bits, keys, totals, lengths, last, numbered)
                    totals[neighbours[before, 1]] -= count
                    totals[neighbours[before, 2]] += count
                    made_numbers[made], made_owners[made] = neighbours[before, 2], w
                    made += 1
                totals[pair] -= count
                if i + 2 < stop:
                    after = symbols[i + 2]
                    if neighbours[after, 3] != new_id:
                        numbered = _neighbour(neighbours, after, 3, _key(right, after), _key(new_id, after), new_id,
                                              slots, bits, keys, totals, lengths, last, numbered)
                    totals[neighbours[after, 4]] -= count
                    totals[neighbours[after, 5]] += count
                    made_numbers[made], made_owners[made] = neighbours[after, 5], w
                    made += 1
                symbols[out] = new_id
                out += 1
                i += 2
            else:
                symbols[out] = symbols[i]
                out += 1
                i += 1
        pieces[w, 1] = out
    return p, made, numbered


@njit(cache=True, nogil=True)
def _neighbour(neighbours: Int32s, x: Symbol, column: int, old: np.int64, new: np.int64, new_id: int, slots: Int32s,
               bits: int, keys: Int64s, totals: Int64s, lengths: Int32s, last: Int32s, numbered: int) -> int:
    # Fill neighbours[x, column:column + 3] for this merge: new_id, then the numbers of the
    # old pair and of the new one, numbering what is new. Returns the numbers used.
    neighbours[x, column] = new_id
    for offset, key in ((1, old), (2, new)):
        n = _number(key, slots, bits, keys, totals, lengths, last, numbered)
        if n == numbered:
            numbered += 1
        neighbours[x, column + offset] = n
    return numbered


@njit(cache=True, nogil=True)
def _file_made(made_numbers: Int32s, made_owners: Int32s, made: int, before_merge: int, numbered: int,
               first: Int64s, lengths: Int32s, last: Int32s, where: Int32s, used: int) -> int:
    # File the pieces of the pairs a merge made: they all hold the new token, so all were
    # numbered in this merge, from before_merge on: a counting sort over that range (each
    # piece once per pair, in the order they came). Returns how much of `where` is used.
    for j in range(made):
        m, owner = made_numbers[j], made_owners[j]
        if last[m] != owner:
            last[m] = owner
            lengths[m] += 1
    for m in range(before_merge, numbered):
        first[m] = used
        used += lengths[m]
        last[m] = -1
    cursor = first[before_merge:numbered].copy()
    for j in range(made):
        m, owner = made_numbers[j], made_owners[j]
        if last[m] != owner:
            last[m] = owner
            where[cursor[m - before_merge]] = owner
            cursor[m - before_merge] += 1
    return used


@njit(cache=True, nogil=True, inline="always")
def _key(left: Symbol, right: Symbol) -> np.int64:
    return (np.int64(left) << SHIFT) | np.int64(right)


@njit(cache=True, nogil=True, inline="always")
def _slot(key: np.int64, bits: int) -> np.int64:
    return np.int64((np.uint64(key) * GOLDEN) >> np.uint64(64 - bits))


@njit(cache=True, nogil=True, inline="always")
def _number(key: np.int64, slots: Int32s, bits: int, keys: Int64s, totals: Int64s, lengths: Int32s, last: Int32s,
            numbered: int) -> int:
    # The pair's number; a pair not seen before gets `numbered`, its count and run empty (the
    # caller counts it). The table is never more than half full (_with_room).
    mask = len(slots) - 1
    i = _slot(key, bits)
    while True:
        number = slots[i]
        if number == EMPTY:
            slots[i] = numbered
            keys[numbered], totals[numbered], lengths[numbered], last[numbered] = key, 0, 0, -1
            return numbered
        if keys[number] == key:
            return int(number)
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _with_room(pairs: Pairs, numbered: int, room: int) -> Pairs:
    # The pairs' arrays, grown (doubled) if `room` numbers would not fit, and the hash table
    # grown to keep it at most half full.
    keys, totals, first, lengths, last, slots, bits = pairs
    if room > len(keys):
        size = 2 * max(room, len(keys))
        keys, totals, first = _grown(keys, size), _grown(totals, size), _grown(first, size)
        lengths, last = _grown(lengths, size), _grown(last, size)
    if 2 * room > len(slots):
        while 2 * room > (1 << bits):
            bits += 1
        slots = np.full(1 << bits, EMPTY, dtype=np.int32)
        mask = len(slots) - 1
        for number in range(numbered):
            i = _slot(keys[number], bits)
            while slots[i] != EMPTY:
                i = (i + 1) & mask
            slots[i] = number
    return keys, totals, first, lengths, last, slots, bits


@njit(cache=True, nogil=True)
def _grown(values: npt.NDArray[Any], size: int) -> npt.NDArray[Any]:
    bigger = np.empty(size, dtype=values.dtype)
    bigger[:len(values)] = values
    return bigger


@intrinsic
def _prefetch(typingctx: Any, values: Any, index: Any) -> Any:
    """Ask the CPU to bring values.flat[index] into its caches without waiting for it (LLVM's
    prefetch: a read, to be kept in every cache level). An address past the end is harmless."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array = context.make_array(signature.args[0])(context, builder, args[0])
        offset = context.cast(builder, args[1], signature.args[1], types.intp)
        byte_pointer = ir.IntType(8).as_pointer()
        address = builder.bitcast(builder.gep(array.data, [offset]), byte_pointer)
        word = ir.IntType(32)
        fetch = builder.module.declare_intrinsic("llvm.prefetch", fnty=ir.FunctionType(
            ir.VoidType(), (byte_pointer, word, word, word)))
        builder.call(fetch, (address, word(0), word(3), word(1)))
        return context.get_dummy_value()
    return types.void(values, index), codegen


# A binary heap over three arrays (count, key, number): the entry of larger count, then of
# smaller key, is on top.
@njit(cache=True, nogil=True, inline="always")
def _above(counts: Int64s, keys: Int64s, i: int, j: int) -> bool:
    return bool(counts[i] > counts[j] or (counts[i] == counts[j] and keys[i] < keys[j]))


@njit(cache=True, nogil=True, inline="always")
def _swap(counts: Int64s, keys: Int64s, numbers: Int32s, i: int, j: int) -> None:
    counts[i], counts[j] = counts[j], counts[i]
    keys[i], keys[j] = keys[j], keys[i]
    numbers[i], numbers[j] = numbers[j], numbers[i]


@njit(cache=True, nogil=True)
def _push(counts: Int64s, keys: Int64s, numbers: Int32s, size: int, count: int, key: np.int64, number: int) -> int:
    counts[size], keys[size], numbers[size] = count, key, number
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _above(counts, keys, i, parent):
            break
        _swap(counts, keys, numbers, i, parent)
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _pop(counts: Int64s, keys: Int64s, numbers: Int32s, size: int) -> int:
    size -= 1
    if size > 0:
        counts[0], keys[0], numbers[0] = counts[size], keys[size], numbers[size]
        _sift_down(counts, keys, numbers, size, 0)
    return size


@njit(cache=True, nogil=True)
def _sift_down(counts: Int64s, keys: Int64s, numbers: Int32s, size: int, i: int) -> None:
    while True:
        top = i
        left = 2 * i + 1
        if left < size and _above(counts, keys, left, top):
            top = left
        if left + 1 < size and _above(counts, keys, left + 1, top):
            top = left + 1
        if top == i:
            return
        _swap(counts, keys, numbers, i, top)
        i = top
