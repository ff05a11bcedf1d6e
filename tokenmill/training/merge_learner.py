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
put back with its current value) finds the next pair. The heap holds only the pairs counted at
least `floor` times, half the highest count when it was last filled; the others wait in the pair
table, and when the heap runs empty it is filled again from the table (`_queued`). Merge counts
only fall (a pair a merge makes is at most as frequent as the merge): on 100 MB of text the heap
is filled 15 times for 32k merges and never holds more than 16,000 of the 1.5 million pairs.

It is all flat arrays, which is what makes it 3-5x faster than rustbpe's own merge loop
(BENCHMARKS.md, "Distributed counting"):
- every pair seen gets the next number from an open-addressing hash table, and its key, count
  and list of pieces live at that index of plain arrays (`PairTable` below);
- within one merge a neighbour's pairs depend on the neighbour alone, so they are looked up
  once per merge, not once per occurrence;
- the pairs a merge makes all hold the new token, so all were numbered during that merge: they
  are listed by a counting sort over that range of numbers;
- the pieces a merge visits are far apart in memory, so their memory is asked for a few
  pieces ahead (`_prefetch`), and the loop over them calls nothing that takes an array (numba
  would move reference counts, atomically, on every call).

Memory is what the learning touches, not what it reserves: every array that grows as merges go
(the pair table's, the heap's, the lists of pieces per pair) is allocated once, at a bound it
cannot pass (`_bounds`), and the kernel gives a page only when it is first written, so no array
is ever copied into a bigger one (a copy holds old and new at once). The lists of pieces are
compacted in place when their next merge would pass the part written so far (`_compacted`): the
runs of pairs counted out are never read again, and most runs die soon after they are written
(on 100 MB of text 36 million are written, at most 18 million are alive at once).

The compiled functions pass the learner's state as named tuples of arrays, one per thing it
keeps: `Pieces` (the pieces being merged), `PairTable` (every pair numbered so far and the
pieces that hold it), `Heap` (the pairs to merge next), `Merge` (the merge being made) and
`MergeNotes` (what one merge notes as it goes). numba passes a named tuple by value, as its
fields: their arrays are changed in place, and a structure one of whose arrays has grown is
built anew (`_with_slots`). The counts that move on every merge (how many pair numbers and how
much of the lists are used, the heap's size, how many pairs a merge made) are plain integers
beside them, passed in and returned: a named tuple's fields cannot be assigned, and an integer
kept in an array instead could not stay in a register in the loop that visits the pieces.
"""

from array import array
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeVar

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

Symbol = int | np.int32 | np.uint16  # a token id
Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]
Symbols = npt.NDArray[np.uint16] | Int32s
Data = TypeVar("Data", npt.NDArray[np.uint8], Int32s)  # pieces end to end: as bytes, or as ids


class Pieces(NamedTuple):
    """The distinct pieces being merged, numbered 0, 1, ... in the order given.

    - symbols: every piece's token ids (uint16 when every id fits, else int32), one piece after
      the other; a merge writes its new id in place of each pair it replaces and moves the rest
      of the piece left.
    - rows: one row a piece (int64, shape (pieces, 3)): its start and its end in `symbols` and
      its count. Its end moves left as merges shorten it. The three side by side are one cache
      line, read on every visit of the piece.
    """

    symbols: Symbols
    rows: Int64s


class PairTable(NamedTuple):
    """Every pair of adjacent tokens seen so far, numbered 0, 1, ... as first seen: a pair's
    number is its index into the first five arrays. How many numbers are in use (`numbered`) is
    carried beside the table, as is how much of `pieces_of` is used (`used`).

    - keys: the pair, as left << 32 | right (int64).
    - counts: how often it occurs now, summed over the pieces (int64): 0 once merged away.
    - run_starts, run_lengths: where its pieces are listed in `pieces_of` (int32, as pair
      numbers are: `pieces_to_merge` refuses pieces whose bounds would not fit):
      pieces_of[run_starts[n]:run_starts[n] + run_lengths[n]] are the pieces that held pair n
      when they were listed (at the start, or by the merge that made the newer of its two
      tokens); later merges may have taken it out of some of them.
    - last_listed: the piece last counted or listed for it (int32, -1 for none yet), so that a
      piece holding the pair twice is counted and listed once.
    - pieces_of: every pair's run of pieces (piece numbers, int32), one run after the other.
    - slots, bits: an open-addressing hash table from a key to its pair's number (int32 slots,
      EMPTY or a number; 2 ** bits of them, never more than half full).

    The first five arrays and `pieces_of` are allocated at their bounds (`_bounds`); `written`,
    carried beside `used`, is how much of `pieces_of` has ever been written (`_compacted`).
    """

    keys: Int64s
    counts: Int64s
    run_starts: Int32s
    run_lengths: Int32s
    last_listed: Int32s
    pieces_of: Int32s
    slots: Int32s
    bits: int


class Heap(NamedTuple):
    """The pairs to merge next, a binary heap over three arrays: entry i is the pair numbered
    numbers[i] (int32), its key keys[i] (int64) and its count when it was put in, counts[i]
    (int64): stale once the pair's count has moved, in which case the learner puts it back
    with its count now when it comes on top. The larger count is on top, a tie to the smaller
    key. How many entries are in use (`queued`) is carried beside it, and so is the `floor`:
    every pair counted at least that many times is in the heap, every other is left out (a
    pair that falls under it is dropped when it comes on top).
    """

    counts: Int64s
    keys: Int64s
    numbers: Int32s


class Merge(NamedTuple):
    """The merge being made: every (left, right) in the pieces, left to right and without
    overlap, becomes new_id. `pair` is the number of (left, right) in the `PairTable`."""

    left: np.int32
    right: np.int32
    new_id: int
    pair: int


class MergeNotes(NamedTuple):
    """What a merge notes as it goes, kept from merge to merge so that it is allocated once.

    - made_pairs, made_in: the pairs the merge made (each holds its new token), each pair's
      number and the piece it was made in (int32), in the order made; how many (`made`) is
      carried beside them.
    - neighbours: a token's pairs that the merge changes, looked up once per merge (int32,
      one row per token, 6 columns): for a token x before the merge's left token, column 0 is
      the new id of the merge that filled columns 1 and 2, the numbers of (x, left) and
      (x, new id); for a token x after its right token, columns 3, 4 and 5 are the same for
      (right, x) and (new id, x). A row whose column 0 (or 3) is not this merge's new id is
      from an earlier merge (or -1: never filled).
    """

    made_pairs: Int32s
    made_in: Int32s
    neighbours: Int32s


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
    length in bytes and count (`learned(pieces_to_merge(...))`)."""
    return learned(pieces_to_merge(lengths, counts, data, merges), merges)


def pieces_to_merge(lengths: Int64s, counts: Int64s, data: npt.NDArray[np.uint8], merges: int) -> Pieces:
    """Pieces given as arrays (each one's length and count, their bytes end to end), as the learner merges them:
    those that can hold a pair, each distinct one once. A piece may come more than once (counted
    by two processes, say): its copies are added up, which changes nothing but the memory and
    time the learning takes (pair counts are sums either way). Nothing given is kept: a caller
    that lets go of the arrays holds only these while the merges are learned."""
    lengths, counts, data = added_up(*_with_pairs(lengths, counts, data))
    return Pieces(data.astype(_symbol_type(BYTES + merges)), _rows(lengths, counts))


def learned(pieces: Pieces, merges: int) -> list[tuple[bytes, bytes]]:
    """The merges learned from `pieces_to_merge`'s pieces (at most `merges`), in order, each as
    the bytes of its two tokens. The pieces are merged in place: they are used up."""
    merged = _learn(pieces, max(merges, 0), BYTES)
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
    pieces held meanwhile (hashed, sorted, compared byte for byte). Pieces that are distinct
    already (no two share a hash: one counter's) come back as they are, not copied."""
    lengths = lengths.astype(np.int64, copy=False)
    starts = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    hashes = _hashes(data, starts)
    ordered = np.sort(hashes)
    if not np.any(ordered[1:] == ordered[:-1]):
        return lengths, counts.astype(np.int64, copy=False), data
    counts = counts.astype(np.int64)  # a copy, added up into below
    order = np.argsort(hashes)  # copies of a piece side by side
    firsts = _first_copies(data, starts, order, counts)  # their counts added up into the first
    return lengths[firsts], np.ascontiguousarray(counts[firsts]), _bytes_of(data, lengths, firsts)


def _with_pairs(lengths: Int64s, counts: Int64s, data: Data) -> tuple[Int64s, Int64s, Data]:
    # The pieces that can hold a pair: two bytes (or ids) or more, seen at all.
    usable = (lengths >= 2) & (counts > 0)
    if usable.all():
        return lengths, counts, data
    return lengths[usable], np.ascontiguousarray(counts[usable]), _bytes_of(data, lengths, usable)


def learn_merges_from(symbols: Int32s, lengths: Int64s, counts: Int64s, first_id: int,
                      merges: int) -> list[tuple[int, int]]:
    """Merges learned by the same rule from pieces already given as token ids (a base tokenizer's
    segmentation of each piece, ids below `first_id`): merge k makes token `first_id + k`. Each
    (symbols, length, count) piece must be distinct; the merges come as pairs of ids."""
    lengths, counts, symbols = _with_pairs(lengths, counts, symbols)
    pieces = Pieces(symbols.astype(_symbol_type(first_id + merges)), _rows(lengths, counts))
    return _learn(pieces, max(merges, 0), first_id)


def _symbol_type(ids: int) -> type[np.unsignedinteger[Any]] | type[np.signedinteger[Any]]:
    # The narrowest type the learner's symbols can have when `ids` ids are used: 2 bytes a symbol
    # for vocabularies up to 65,536 (half the memory of the longest array the learner holds).
    return np.uint16 if ids <= 1 << 16 else np.int32


def _rows(lengths: Int64s, counts: Int64s) -> Int64s:
    # `Pieces.rows` of pieces stored one after the other: each one's start, end and count.
    rows = np.empty((len(lengths), 3), dtype=np.int64)
    np.cumsum(lengths, out=rows[:, 1])
    positions = int(rows[-1, 1]) - len(lengths) if len(lengths) else 0
    if sum(_bounds(positions)) >= 1 << 31:
        raise ValueError(f"{len(lengths)} distinct pieces of {positions + len(lengths)} symbols: more than the "
                         "learner can number (its pairs and their lists of pieces are numbered in 32 bits)")
    rows[:, 0] = rows[:, 1] - lengths
    rows[:, 2] = counts
    return rows


def warm_up() -> None:
    """Compile (or load from numba's cache) the learner now: a worker calls this before it forks
    its children, which then never pay for compiling (seconds, and 100 MiB at its peak): both
    symbol types (`_symbol_type`), as the merges asked for choose it, not the merges made."""
    for merges in (2, 1 << 16):
        learn_merges([(b"warm up", 2), (b"up", 1)], merges)


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
def _bytes_of(data: npt.NDArray[Any], lengths: Int64s, kept: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    # The bytes (or ids) of the kept pieces, end to end.
    out = np.empty(np.sum(lengths * kept), dtype=data.dtype)
    at = written = 0
    for w in range(len(lengths)):
        if kept[w]:
            out[written:written + lengths[w]] = data[at:at + lengths[w]]
            written += lengths[w]
        at += lengths[w]
    return out


@njit(cache=True, nogil=True)
def _first_copies(data: npt.NDArray[np.uint8], starts: Int64s, order: Int64s, counts: Int64s) -> npt.NDArray[np.bool_]:
    # With the pieces in `order` (equal hashes side by side), keep the first of each run of
    # equal bytes, its count the run's sum. A piece that only shares a hash with the one before
    # (rare) is kept as it is: a piece may come twice, and the merges are the same.
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
def _learn(pieces: Pieces, wanted: int, first_id: int) -> list[tuple[int, int]]:
    rows = pieces.rows
    pairs, numbered, used = _first_pairs(pieces)
    written = used
    capacity = len(pairs.keys)  # a pair is in the heap at most once, and the table has room for every pair
    heap = Heap(np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64),
                np.empty(capacity, dtype=np.int32))
    queued, floor = 0, 1

    merged: list[tuple[int, int]] = []
    notes = MergeNotes(np.empty(64, dtype=np.int32), np.empty(64, dtype=np.int32),
                       np.full((first_id + wanted, 6), -1, dtype=np.int32))
    while len(merged) < wanted:
        if queued == 0:
            queued, floor = _queued(heap, pairs, numbered)
            if queued == 0:
                break  # no pair is left
        seen, key, n = heap.counts[0], heap.keys[0], heap.numbers[0]
        queued = _pop(heap, queued)
        current = pairs.counts[n]
        if current < floor:  # counted out, or under the floor: back in when the heap is filled again
            continue
        if current != seen:
            queued = _push(heap, queued, current, key, n)
            continue
        new_id = first_id + len(merged)
        left, right = np.int32(key >> SHIFT), np.int32(key & 0xFFFFFFFF)
        merged.append((int(left), int(right)))  # (numba types the list by this, before the Merge is known)
        merge = Merge(left, right, new_id, int(n))
        before_merge = numbered
        made = 0
        p, end = pairs.run_starts[n], pairs.run_starts[n] + pairs.run_lengths[n]
        while True:  # each piece of the pair once (listed so), making room when the next might not fit
            p, made, numbered = _merge_run(pieces, pairs, merge, notes, p, end, numbered, made)
            if p == end:
                break
            w = pairs.pieces_of[p]
            span = int(rows[w, 1] - rows[w, 0])
            pairs = _with_slots(pairs, numbered, numbered + 2 * span)
            if made + 2 * span > len(notes.made_pairs):
                more = 2 * (made + 2 * span)
                notes = MergeNotes(_grown(notes.made_pairs, more), _grown(notes.made_in, more), notes.neighbours)
        if made == 0:
            continue
        if used + made > written:
            used = _compacted(pairs, before_merge, used)
            written = min(max(written, used + made + (used + made) // 16), len(pairs.pieces_of))
        used = _list_made(notes, made, before_merge, numbered, pairs, used)
        for m in range(before_merge, numbered):
            if pairs.counts[m] >= floor:
                queued = _push(heap, queued, pairs.counts[m], pairs.keys[m], m)
    return merged


@njit(cache=True, nogil=True)
def _first_pairs(pieces: Pieces) -> tuple[PairTable, int, int]:
    # The pairs of the pieces as they come: counted, each position's pair number noted, then
    # each pair's pieces listed by a counting sort (each piece once per pair). Returns the
    # table, how many pairs are numbered and how much of its `pieces_of` is used.
    symbols, rows = pieces.symbols, pieces.rows
    positions, made = _bounds(len(symbols) - len(rows))
    capacity = max(positions + made, 16)
    pairs = PairTable(np.empty(capacity, dtype=np.int64), np.empty(capacity, dtype=np.int64),
                      np.empty(capacity, dtype=np.int32), np.empty(capacity, dtype=np.int32),
                      np.empty(capacity, dtype=np.int32), np.empty(0, dtype=np.int32),
                      np.full(1 << 17, EMPTY, dtype=np.int32), 17)
    numbered = 0
    numbers = np.empty(len(symbols), dtype=np.int32)
    for w in range(len(rows)):
        room = numbered + int(rows[w, 1] - rows[w, 0])
        if 2 * room > len(pairs.slots):
            pairs = _with_slots(pairs, numbered, room)
        for i in range(rows[w, 0], rows[w, 1] - 1):
            n = _number(_key(symbols[i], symbols[i + 1]), pairs, numbered)
            if n == numbered:
                numbered += 1
            pairs.counts[n] += rows[w, 2]
            if pairs.last_listed[n] != w:
                pairs.last_listed[n] = w
                pairs.run_lengths[n] += 1
            numbers[i] = n
    used = 0
    for n in range(numbered):
        pairs.run_starts[n] = used
        used += pairs.run_lengths[n]
        pairs.last_listed[n] = -1
    pieces_of = np.empty(max(used + made, 16), dtype=np.int32)
    cursor = pairs.run_starts[:numbered].copy()
    for w in range(len(rows)):
        for i in range(rows[w, 0], rows[w, 1] - 1):
            n = numbers[i]
            if pairs.last_listed[n] != w:
                pairs.last_listed[n] = w
                pieces_of[cursor[n]] = w
                cursor[n] += 1
    pairs = PairTable(pairs.keys, pairs.counts, pairs.run_starts, pairs.run_lengths, pairs.last_listed, pieces_of,
                      pairs.slots, pairs.bits)
    return pairs, numbered, used


@njit(cache=True, nogil=True)
def _merge_run(pieces: Pieces, pairs: PairTable, merge: Merge, notes: MergeNotes, p: int, end: int, numbered: int,
               made: int) -> tuple[int, int, int]:
    # Make the merge in the pieces pairs.pieces_of[p:end], each left to right, updating the
    # pair counts as rustbpe does, and note the pairs made (notes.made_pairs and made_in, from
    # `made` on); stop at the first piece that might not fit the arrays. Returns (where it
    # stopped, how many pairs are noted, how many are numbered). One call per merge (or per
    # growth): the loop below calls nothing that takes an array but `_neighbour`, once per
    # neighbouring token and merge (see MergeNotes).
    symbols, rows, pieces_of, pair_counts = pieces.symbols, pieces.rows, pairs.pieces_of, pairs.counts
    made_pairs, made_in, neighbours = notes.made_pairs, notes.made_in, notes.neighbours
    left, right, new_id = merge.left, merge.right, merge.new_id
    while p < end:
        # The pieces listed are far apart in memory: ask early for the next ones' rows, and
        # for their symbols once their rows are in, or every visit waits on memory twice.
        # (An intrinsic is called without its typing context, which mypy cannot know.)
        if p + 2 * AHEAD < end:
            _prefetch(rows, 3 * pieces_of[p + 2 * AHEAD])  # type: ignore[call-arg]
        if p + AHEAD < end:
            _prefetch(symbols, rows[pieces_of[p + AHEAD], 0])  # type: ignore[call-arg]
        w = pieces_of[p]
        start, stop, count = rows[w, 0], rows[w, 1], rows[w, 2]
        room = numbered + 2 * (stop - start)  # at most two new pairs per symbol
        if 2 * room > len(pairs.slots) or made + 2 * (stop - start) > len(made_pairs):
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
                                              pairs, numbered)
                    pair_counts[neighbours[before, 1]] -= count
                    pair_counts[neighbours[before, 2]] += count
                    made_pairs[made], made_in[made] = neighbours[before, 2], w
                    made += 1
                pair_counts[merge.pair] -= count
                if i + 2 < stop:
                    after = symbols[i + 2]
                    if neighbours[after, 3] != new_id:
                        numbered = _neighbour(neighbours, after, 3, _key(right, after), _key(new_id, after), new_id,
                                              pairs, numbered)
                    pair_counts[neighbours[after, 4]] -= count
                    pair_counts[neighbours[after, 5]] += count
                    made_pairs[made], made_in[made] = neighbours[after, 5], w
                    made += 1
                symbols[out] = new_id
                out += 1
                i += 2
            else:
                symbols[out] = symbols[i]
                out += 1
                i += 1
        rows[w, 1] = out
    return p, made, numbered


@njit(cache=True, nogil=True)
def _neighbour(neighbours: Int32s, x: Symbol, column: int, old: np.int64, new: np.int64, new_id: int,
               pairs: PairTable, numbered: int) -> int:
    # Fill neighbours[x, column:column + 3] for this merge: new_id, then the numbers of the
    # old pair and of the new one, numbering what is new. Returns how many are numbered.
    neighbours[x, column] = new_id
    for offset, key in ((1, old), (2, new)):
        n = _number(key, pairs, numbered)
        if n == numbered:
            numbered += 1
        neighbours[x, column + offset] = n
    return numbered


@njit(cache=True, nogil=True)
def _list_made(notes: MergeNotes, made: int, before_merge: int, numbered: int, pairs: PairTable, used: int) -> int:
    # List the pieces of the pairs a merge made: they all hold the new token, so all were
    # numbered in this merge, from before_merge on: a counting sort over that range (each
    # piece once per pair, in the order they came). Returns how much of pairs.pieces_of is used.
    for j in range(made):
        m, piece = notes.made_pairs[j], notes.made_in[j]
        if pairs.last_listed[m] != piece:
            pairs.last_listed[m] = piece
            pairs.run_lengths[m] += 1
    for m in range(before_merge, numbered):
        pairs.run_starts[m] = used
        used += pairs.run_lengths[m]
        pairs.last_listed[m] = -1
    cursor = pairs.run_starts[before_merge:numbered].copy()
    for j in range(made):
        m, piece = notes.made_pairs[j], notes.made_in[j]
        if pairs.last_listed[m] != piece:
            pairs.last_listed[m] = piece
            pairs.pieces_of[cursor[m - before_merge]] = piece
            cursor[m - before_merge] += 1
    return used


@njit(cache=True, nogil=True, inline="always")
def _key(left: Symbol, right: Symbol) -> np.int64:
    return (np.int64(left) << SHIFT) | np.int64(right)


@njit(cache=True, nogil=True, inline="always")
def _slot(key: np.int64, bits: int) -> np.int64:
    return np.int64((np.uint64(key) * GOLDEN) >> np.uint64(64 - bits))


@njit(cache=True, nogil=True, inline="always")
def _number(key: np.int64, pairs: PairTable, numbered: int) -> int:
    # The pair's number; a pair not seen before gets `numbered`, its count and run empty (the
    # caller counts it). The table is never more than half full (_with_slots).
    slots = pairs.slots
    mask = len(slots) - 1
    i = _slot(key, pairs.bits)
    while True:
        number = slots[i]
        if number == EMPTY:
            slots[i] = numbered
            pairs.keys[numbered], pairs.counts[numbered] = key, 0
            pairs.run_lengths[numbered], pairs.last_listed[numbered] = 0, -1
            return numbered
        if pairs.keys[number] == key:
            return int(number)
        i = (i + 1) & mask


@njit(cache=True, nogil=True)
def _bounds(positions: int) -> tuple[int, int]:
    # What the arrays that grow with the merges can never pass: (the pairs of adjacent tokens in
    # the pieces at the start, the pairs all merges together can make). A merge replaces two
    # tokens of a piece by one and makes at most two pairs there (with the tokens before and
    # after), and a piece cannot shrink below one token, so all merges make at most twice the
    # positions there are. Pairs are numbered (and listed, and queued) at most once per pair
    # there is at the start or made. `positions`: the pieces' symbols but one a piece.
    return positions, 2 * positions


@njit(cache=True, nogil=True)
def _compacted(pairs: PairTable, numbered: int, used: int) -> int:
    # Move the runs of the pairs still counted (counts > 0) to the front of pieces_of, in
    # place and in order (runs lie in the order of their pairs' numbers), dropping the runs of
    # pairs counted out: no merge reads them again, as a pair's count only grows in the merge
    # that makes it. Returns how much of pieces_of is used now.
    pieces_of, run_starts, run_lengths, counts = pairs.pieces_of, pairs.run_starts, pairs.run_lengths, pairs.counts
    cursor = 0
    for n in range(numbered):
        length = run_lengths[n]
        if counts[n] <= 0:
            run_lengths[n] = 0
            run_starts[n] = cursor
            continue
        start = run_starts[n]
        for k in range(length):
            pieces_of[cursor + k] = pieces_of[start + k]
        run_starts[n] = cursor
        cursor += length
    assert cursor <= used
    return cursor


@njit(cache=True, nogil=True)
def _with_slots(pairs: PairTable, numbered: int, room: int) -> PairTable:
    # The table, its hash table grown to keep it at most half full for `room` numbers (its
    # other arrays are allocated at their bounds).
    keys, counts, run_starts, run_lengths, last_listed, pieces_of, slots, bits = pairs
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
    return PairTable(keys, counts, run_starts, run_lengths, last_listed, pieces_of, slots, bits)


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


# The heap's functions (`Heap`): the entry of larger count, then of smaller key, is on top.
@njit(cache=True, nogil=True)
def _queued(heap: Heap, pairs: PairTable, numbered: int) -> tuple[int, int]:
    # Fill the (empty) heap with every pair counted at least half the highest count there is.
    # Returns the heap's size and that floor; none is queued when no pair is left.
    highest = 0
    for n in range(numbered):
        highest = max(highest, pairs.counts[n])
    floor = max(highest // 2, 1)
    queued = 0
    for n in range(numbered):
        if pairs.counts[n] >= floor:
            heap.counts[queued], heap.keys[queued], heap.numbers[queued] = pairs.counts[n], pairs.keys[n], n
            queued += 1
    for i in range(queued // 2 - 1, -1, -1):
        _sift_down(heap, queued, i)
    return queued, floor


@njit(cache=True, nogil=True, inline="always")
def _above(heap: Heap, i: int, j: int) -> bool:
    counts, keys = heap.counts, heap.keys
    return bool(counts[i] > counts[j] or (counts[i] == counts[j] and keys[i] < keys[j]))


@njit(cache=True, nogil=True, inline="always")
def _swap(heap: Heap, i: int, j: int) -> None:
    counts, keys, numbers = heap
    counts[i], counts[j] = counts[j], counts[i]
    keys[i], keys[j] = keys[j], keys[i]
    numbers[i], numbers[j] = numbers[j], numbers[i]


@njit(cache=True, nogil=True)
def _push(heap: Heap, size: int, count: int, key: np.int64, number: int) -> int:
    # Put in an entry; returns the heap's size.
    heap.counts[size], heap.keys[size], heap.numbers[size] = count, key, number
    i = size
    while i > 0:
        parent = (i - 1) // 2
        if not _above(heap, i, parent):
            break
        _swap(heap, i, parent)
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _pop(heap: Heap, size: int) -> int:
    # Take out the top entry; returns the heap's size.
    size -= 1
    if size > 0:
        heap.counts[0], heap.keys[0], heap.numbers[0] = heap.counts[size], heap.keys[size], heap.numbers[size]
        _sift_down(heap, size, 0)
    return size


@njit(cache=True, nogil=True)
def _sift_down(heap: Heap, size: int, i: int) -> None:
    while True:
        top = i
        left = 2 * i + 1
        if left < size and _above(heap, left, top):
            top = left
        if left + 1 < size and _above(heap, left + 1, top):
            top = left + 1
        if top == i:
            return
        _swap(heap, i, top)
        i = top
