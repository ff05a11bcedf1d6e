"""sentencepiece Unigram's best segmentation of a word, and by how much it wins, in compiled code.

A word ("▁" + its bytes) is segmented by the path of highest total score through its pieces,
as sentencepiece's Viterbi finds it: every piece of the model (NORMAL pieces; the trie below
holds them) that matches at a character boundary, and an unknown node over one character
wherever no piece of exactly that character starts (its score is the lowest piece score minus
10, and with byte fallback it becomes the character's bytes). Besides the best path, the
search keeps the score of the second best, so the margin between them is known: sentencepiece
adds scores in float32 along the whole line, and only where the margin is larger than that
rounding can be (`sure_before`) is its choice certainly this one. `tokenmill.evaluation.word_cache` sends the
lines where it is not to sentencepiece itself.

Deliberately not handled: models with user-defined pieces (sentencepiece's bonus for them
has changed between releases), sampling and n-best output.
"""

from dataclasses import dataclass

import numpy as np
from numba import njit

from tokenmill.evaluation.utf8 import SEQUENCE_BYTES
from tokenmill.formats.sentencepiece_model import BYTE, NORMAL, UNIGRAM, USER_DEFINED, ModelProto

UNKNOWN_PENALTY = np.float32(10.0)
UNIT_ROUNDOFF = 2.0 ** -24  # of float32
# How far beyond the worst case of float32 rounding a margin must reach to be sure.
SAFETY = 4.0
MAX_WORD = 256  # bytes: longer words (unspaced scripts) are left to sentencepiece


@dataclass(frozen=True)
class Pieces:
    """A Unigram model's NORMAL pieces as a double-array byte trie, their scores and the model's
    byte pieces. A unit per trie node, [base, check, piece]: the child of node s along byte c is
    unit base[s] + c if that unit's check is s; its piece is the id ending there, or -1. A step
    down the trie reads one unit."""

    units: np.ndarray  # (n, 3) int32: base, check, piece
    scores: np.ndarray  # float64 of each piece's float32 score
    unknown_score: float
    byte_ids: np.ndarray  # the id of "<0xAB>" for each byte

    @classmethod
    def of(cls, proto: ModelProto) -> "Pieces":
        kinds = np.array([piece.type for piece in proto.pieces], dtype=np.int64)
        scores = np.array([piece.score for piece in proto.pieces], dtype=np.float32)
        normal = sorted((piece.piece.encode("utf-8"), i) for i, piece in enumerate(proto.pieces)
                        if piece.type == NORMAL)
        keys = np.frombuffer(b"".join(key for key, _ in normal), dtype=np.uint8)
        ends = np.cumsum(np.array([len(key) for key, _ in normal], dtype=np.int64))
        units = _double_array(*_breadth_first(keys, ends, np.array([i for _, i in normal], dtype=np.int64)))
        lowest = scores[kinds == NORMAL].min() if normal else np.float32(0)
        byte_ids = np.full(256, -1, dtype=np.int64)
        for i in np.flatnonzero(kinds == BYTE):
            byte_ids[int(proto.pieces[int(i)].piece[3:5], 16)] = i
        return cls(units, scores.astype(np.float64), float(np.float32(lowest - UNKNOWN_PENALTY)), byte_ids)

    @staticmethod
    def applies(proto: ModelProto) -> bool:
        """Whether words of this model can be segmented here: Unigram with byte fallback, no
        user-defined pieces."""
        return (proto.trainer_spec.model_type == UNIGRAM and proto.trainer_spec.byte_fallback
                and not any(piece.type == USER_DEFINED for piece in proto.pieces))


@njit(cache=True, nogil=True)
def _breadth_first(keys: np.ndarray, ends: np.ndarray,
                   ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The byte trie of sorted keys (key k is keys[ends[k - 1]:ends[k]], of id ids[k]), its
    nodes numbered breadth first with each node's children together, sorted by byte: each
    node's first child and how many it has, the byte leading to it, and the id of the key
    ending there (-1)."""
    # Depth first, as the sorted keys give it: each adds the nodes past the prefix it shares
    # with the one before; `path` holds the nodes along the key before.
    size = (ends[-1] if len(ends) else 0) + 1
    parent, byte = np.full(size, -1, dtype=np.int64), np.zeros(size, dtype=np.int64)
    piece = np.full(size, -1, dtype=np.int64)
    path = np.zeros(size, dtype=np.int64)
    nodes, before, before_length = 1, 0, 0
    for key in range(len(ends)):
        start = ends[key - 1] if key else 0
        length = ends[key] - start
        shared = 0
        while shared < min(length, before_length) and keys[start + shared] == keys[before + shared]:
            shared += 1
        for depth in range(shared, length):
            parent[nodes], byte[nodes] = path[depth], keys[start + depth]
            path[depth + 1] = nodes
            nodes += 1
        piece[path[length]] = ids[key]
        before, before_length = start, length
    # Each node's children, in the order made (by byte), then breadth first from the root.
    child_count = np.zeros(nodes, dtype=np.int64)
    for node in range(1, nodes):
        child_count[parent[node]] += 1
    first = np.cumsum(child_count) - child_count
    children, filled = np.empty(nodes, dtype=np.int64), first.copy()
    for node in range(1, nodes):
        children[filled[parent[node]]] = node
        filled[parent[node]] += 1
    order, number = np.zeros(nodes, dtype=np.int64), np.zeros(nodes, dtype=np.int64)
    tail = 1
    for head in range(nodes):
        for child in children[first[order[head]]:first[order[head]] + child_count[order[head]]]:
            order[tail], number[child] = child, tail
            tail += 1
    first_child = np.zeros(nodes, dtype=np.int64)
    for position in range(nodes):
        if child_count[order[position]]:
            first_child[position] = number[children[first[order[position]]]]
    return first_child, child_count[order], byte[order], piece[order]


@njit(cache=True, nogil=True)
def _free_units(size: int) -> np.ndarray:
    """Double-array units none of which holds a node yet (check -1)."""
    units = np.zeros((size, 3), dtype=np.int32)
    units[:, 1], units[:, 2] = -1, -1
    return units


@njit(cache=True, nogil=True)
def _double_array(first_child: np.ndarray, child_count: np.ndarray, leading: np.ndarray,
                  piece_at: np.ndarray) -> np.ndarray:
    """Place the trie (nodes numbered breadth first, children together) in a double array: each
    node's children go to the first base where all their units are free, searched from where
    the array stops being nearly full (Darts' heuristic)."""
    units = _free_units(2 * len(piece_at) + 512)
    units[0, 1], units[0, 2] = 0, piece_at[0]  # the root
    unit_of = np.zeros(len(piece_at), dtype=np.int64)  # node -> unit
    search_from = 1
    for node in range(len(piece_at)):
        count = child_count[node]
        if count == 0:
            continue
        first = first_child[node]
        position = max(leading[first] + 1, search_from) - 1
        busy, first_free = 0, -1
        while True:
            position += 1
            if position + 256 >= len(units):
                grown = _free_units(2 * len(units))
                grown[:len(units)] = units
                units = grown
            if units[position, 1] != -1:
                busy += 1
                continue
            if first_free < 0:
                first_free = position
            base = position - leading[first]
            fits = True
            for child in range(first + 1, first + count):
                if units[base + leading[child], 1] != -1:
                    fits = False
                    break
            if fits:
                break
        if first_free >= 0 and busy >= 0.95 * (position - first_free + 1):
            search_from = position
        elif first_free >= 0:
            search_from = max(search_from, first_free)
        units[unit_of[node], 0] = base
        for child in range(first, first + count):
            unit = base + leading[child]
            units[unit, 1], units[unit, 2] = unit_of[node], piece_at[child]
            unit_of[child] = unit
    last = 0
    for unit in range(len(units)):
        if units[unit, 1] != -1:
            last = unit
    return units[:last + 257].copy()  # room for any byte after the last base


@njit(cache=True, nogil=True)
def best_path(data: np.ndarray, units: np.ndarray, scores: np.ndarray, unknown_score: float, byte_ids: np.ndarray,
              out: np.ndarray, at: int, best: np.ndarray, second: np.ndarray, from_position: np.ndarray,
              from_piece: np.ndarray) -> tuple[int, float, float]:
    """Write the ids of the best segmentation of `data` (a normalized word, "▁" first) to `out`
    from `at` on; return how many, its score, and its margin over the second best path (inf if
    none). The other arrays are scratch space of len(data) + 1 rows.

    As sentencepiece does it: from each character boundary in turn, whose best path is known
    by then, one walk down the trie offers each piece starting there to the paths ending where
    the piece ends (shortest first; the first of equal scores stays best)."""
    size, unit_count = len(data), len(units)
    best[:size + 1] = -np.inf
    second[:size + 1] = -np.inf
    best[0] = 0.0
    start = 0
    while start < size:
        width = SEQUENCE_BYTES[data[start]]
        before, runner_up = best[start], second[start]
        single = False  # a piece of exactly this character
        node, end, walking = 0, start, True
        while walking:
            piece = -1
            if end < size:
                base = units[node, 0]
                child = base + data[end]
                if base > 0 and child < unit_count and units[child, 1] == node:  # a step down the trie
                    node, end = child, end + 1
                    piece = units[child, 2]
                    if piece < 0:
                        continue
                    single |= end - start == width
                    score = scores[piece]
            if piece < 0:  # the walk is over: an unknown character, unless a piece was exactly that
                walking = False
                if single:
                    break
                end, score = min(start + width, size), unknown_score
            # Keep the best two scores of paths ending at `end`, and where the best comes from.
            first = before + score
            if first > best[end]:
                second[end] = max(best[end], runner_up + score)
                best[end], from_position[end], from_piece[end] = first, start, piece
            elif first > second[end]:
                second[end] = first
        start += width
    # Back from the end: pieces, or an unknown character's bytes.
    count, end = 0, size
    while end > 0:
        start = from_position[end]
        count += end - start if from_piece[end] < 0 else 1
        end = start
    written, end = count, size
    while end > 0:
        start = from_position[end]
        if from_piece[end] < 0:
            for offset in range(end - start - 1, -1, -1):
                written -= 1
                out[at + written] = byte_ids[data[start + offset]]
        else:
            written -= 1
            out[at + written] = from_piece[end]
        end = start
    return count, best[size], best[size] - second[size]


def segment_words(keys: np.ndarray, starts: np.ndarray, lengths: np.ndarray, pieces: Pieces, ids: np.ndarray,
                  id_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Segment words ("▁" + keys[start:start + length] each), writing their ids to `ids` from
    `id_count` on (room for length + 3 each): where each word's ids start, how many (-1 for a
    word longer than MAX_WORD, left to sentencepiece), its score, the score a line may have
    before it for sentencepiece to choose the same (`sure_before`), and the ids' new end."""
    return _segment_words(keys, starts, lengths, pieces.units, pieces.scores, pieces.unknown_score,
                          pieces.byte_ids, ids, id_count)


@njit(cache=True, nogil=True)
def _segment_words(keys: np.ndarray, starts: np.ndarray, lengths: np.ndarray, units: np.ndarray,
                   scores: np.ndarray, unknown_score: float, byte_ids: np.ndarray, ids: np.ndarray,
                   id_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    id_starts = np.empty(len(starts), dtype=np.int64)
    id_lengths = np.full(len(starts), -1, dtype=np.int64)
    word_scores = np.zeros(len(starts))
    limits = np.zeros(len(starts))
    word = np.empty(MAX_WORD + 3, dtype=np.uint8)
    word[0], word[1], word[2] = 0xE2, 0x96, 0x81  # "▁"
    rows = len(word) + 1
    best, second = np.empty(rows), np.empty(rows)
    from_position, from_piece = np.empty(rows, dtype=np.int64), np.empty(rows, dtype=np.int64)
    for index in range(len(starts)):
        id_starts[index] = id_count
        length = lengths[index]
        if length > MAX_WORD:
            continue
        word[3:3 + length] = keys[starts[index]:starts[index] + length]
        count, score, margin = best_path(word[:3 + length], units, scores, unknown_score, byte_ids, ids, id_count,
                                         best, second, from_position, from_piece)
        id_lengths[index], word_scores[index] = count, score
        limits[index] = sure_before(margin, score, length + 3)
        id_count += count
    return id_starts, id_lengths, word_scores, limits, id_count


@njit(cache=True, nogil=True)
def sure_before(margin: float, score: float, length: int) -> float:
    """How low the score of a line before a word (of `score`, over `length` bytes, winning by
    `margin`) may be for sentencepiece certainly to choose the word's best path: float32
    rounding of every sum along two paths of at most length + 1 pieces, each at most
    |before| + |score| + margin, cannot close the margin. Returns that bound on |before|
    (inf: no other path; below 0: never)."""
    if margin == np.inf:
        return np.inf
    return margin / (SAFETY * 2.0 * (length + 2) * UNIT_ROUNDOFF) - abs(score) - margin
