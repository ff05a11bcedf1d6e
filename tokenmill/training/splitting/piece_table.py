"""A hash table of pieces (byte strings) and their counts, in compiled code.

Open addressing with linear probing over a power of two of slots, at most half full. A slot
holds a piece's code and count side by side (`rows`), so counting a piece seen before reads
one cache line, which is asked for a few pieces ahead (`_prefetch`): the pieces of a batch
are known before any is counted. The code is the piece itself, with its length, when it has
at most 7 bytes (equal codes are equal pieces: no bytes compared; 0 is a free slot), else a
hash of its 8-byte words with bit 62 set. Each slot also has its piece's number (`numbers`,
in the order first seen), whose bytes are keys[starts[n]:starts[n + 1]].

`count` returns to its caller for room (ROOM) rather than growing arrays in its loop; the
caller grows them (`grown`) and calls it again from where it stopped.
"""

from typing import Any

import numpy as np
import numpy.typing as npt
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

PACKED = 7  # a piece of at most this many bytes is its own code
WORD = 8  # bytes read at once: the data and the keys go on this many bytes past their last piece
GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing: the top bits of code * 2**64 / phi
AHEAD = 8  # pieces ahead of the one counted whose slot is asked for
DONE, ROOM = 0, 1  # how `count` returned

Uint8s = npt.NDArray[np.uint8]
Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]


@intrinsic
def _word(typingctx: Any, values: Any, index: Any) -> Any:
    """The 8 bytes of a uint8 array from `index` on as one little-endian number, wherever they
    start (an unaligned load): the array must go on 8 bytes past the last piece read (`WORD`)."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        array = context.make_array(signature.args[0])(context, builder, args[0])
        offset = context.cast(builder, args[1], signature.args[1], types.intp)
        address = builder.bitcast(builder.gep(array.data, [offset]), ir.IntType(64).as_pointer())
        return builder.load(address, align=1)
    return types.uint64(values, index), codegen


@intrinsic
def _prefetch(typingctx: Any, values: Any, index: Any) -> Any:
    """Ask the CPU to bring values.flat[index] into its caches without waiting for it (as
    tokenmill.training.merge_learner does)."""
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


@njit(cache=True, nogil=True)
def padded(data: Uint8s) -> Uint8s:
    """A copy with WORD more bytes: the compiled loops read 8 bytes at a time (and want it writable)."""
    return padded_into(data, np.empty(len(data) + WORD, dtype=np.uint8))


@njit(cache=True, nogil=True)
def padded_into(data: Uint8s, out: Uint8s) -> Uint8s:
    """`padded`, written into the front of `out` (room for WORD bytes more than the data)."""
    out[:len(data)] = data
    out[len(data):len(data) + WORD] = 0
    return out[:len(data) + WORD]


@njit(cache=True, nogil=True)
def _log2(size: int) -> int:
    bits = 0
    while (1 << bits) < size:
        bits += 1
    return bits


@njit(cache=True, nogil=True)
def codes(data: Uint8s, ends: Int64s) -> Int64s:
    """Each piece's code; piece k is data[ends[k - 1]:ends[k]] (the first from 0)."""
    return codes_into(data, ends, np.empty(len(ends), dtype=np.int64))


@njit(cache=True, nogil=True)
def codes_into(data: Uint8s, ends: Int64s, out: Int64s) -> Int64s:
    """`codes`, written into the front of `out` (room for a code per piece)."""
    out = out[:len(ends)]
    first = 0
    for k in range(len(ends)):
        last = ends[k]
        length = last - first
        if length <= PACKED:
            code = _word(data, first) & (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)  # type: ignore[call-arg]
            out[k] = np.int64(code) | (np.int64(length) << 56)
        else:
            value = np.uint64(length)
            for b in range(first, last - 8, 8):
                value = (value ^ _word(data, b)) * GOLDEN  # type: ignore[call-arg]
                value ^= value >> np.uint64(29)
            # The last 8 bytes (overlapping the words before when the length is not a multiple of 8).
            value = (value ^ _word(data, last - 8)) * GOLDEN  # type: ignore[call-arg]
            out[k] = np.int64((value >> np.uint64(2)) | np.uint64(1 << 62))
        first = last
    return out


@njit(cache=True, nogil=True)
def count(data: Uint8s, ends: Int64s, piece_codes: Int64s, weights: Int64s, at: Int64s, rows: Int64s,
          numbers: Int32s, starts: Int64s, keys: Uint8s, sizes: Int64s) -> int:
    """Count pieces at[0], at[0] + 1, ... of the batch (see `codes`) into the table (`sizes`:
    its pieces and key bytes), each seen once or, when there are `weights`, weights[k] times.
    Returns DONE, or ROOM with at[0] the piece that did not fit."""
    mask = len(numbers) - 1
    shift = np.uint64(64 - _log2(len(numbers)))
    pieces, key_bytes = sizes[0], sizes[1]
    weighted = len(weights) > 0
    k = at[0]
    status = DONE
    while k < len(ends):
        if k + AHEAD < len(ends):
            _prefetch(rows, 2 * np.int64((np.uint64(piece_codes[k + AHEAD]) * GOLDEN) >> shift))  # type: ignore[call-arg]
        code = piece_codes[k]
        weight = weights[k] if weighted else 1
        first = ends[k - 1] if k > 0 else 0
        last = ends[k]
        length = last - first
        slot = np.int64((np.uint64(code) * GOLDEN) >> shift)
        while True:
            if rows[slot, 0] == 0:  # a new piece
                if 2 * (pieces + 1) > len(numbers) or pieces + 1 >= len(starts) or key_bytes + length + WORD > len(keys):
                    status = ROOM
                    break
                rows[slot, 0], rows[slot, 1] = code, weight
                numbers[slot] = pieces
                for b in range(length):
                    keys[key_bytes + b] = data[first + b]
                key_bytes += length
                pieces += 1
                starts[pieces] = key_bytes
                break
            if rows[slot, 0] == code:
                same = length <= PACKED
                if not same:
                    n = numbers[slot]
                    if starts[n + 1] - starts[n] == length:
                        same = _word(keys, starts[n] + length - 8) == _word(data, last - 8)  # type: ignore[call-arg]
                        for b in range(0, length - 8, 8):
                            if not same or _word(keys, starts[n] + b) != _word(data, first + b):
                                same = False
                                break
                if same:
                    rows[slot, 1] += weight
                    break
            slot = (slot + 1) & mask
        if status == ROOM:
            break
        k += 1
    at[0] = k
    sizes[0], sizes[1] = pieces, key_bytes
    return status


@njit(cache=True, nogil=True)
def rehashed(rows: Int64s, numbers: Int32s, size: int) -> tuple[Int64s, Int32s]:
    """The table's rows and numbers in `size` slots (a power of two)."""
    new_rows = np.zeros((size, 2), dtype=np.int64)
    new_numbers = np.zeros(size, dtype=np.int32)
    mask = size - 1
    shift = np.uint64(64 - _log2(size))
    for old in range(len(numbers)):
        if rows[old, 0] != 0:
            slot = np.int64((np.uint64(rows[old, 0]) * GOLDEN) >> shift)
            while new_rows[slot, 0] != 0:
                slot = (slot + 1) & mask
            new_rows[slot, 0], new_rows[slot, 1] = rows[old, 0], rows[old, 1]
            new_numbers[slot] = numbers[old]
    return new_rows, new_numbers


@njit(cache=True, nogil=True)
def counts_by_number(rows: Int64s, numbers: Int32s, pieces: int) -> Int64s:
    """Each piece's count, in the order of their numbers."""
    out = np.zeros(pieces, dtype=np.int64)
    for slot in range(len(numbers)):
        if rows[slot, 0] != 0:
            out[numbers[slot]] = rows[slot, 1]
    return out
