"""Plain-Python references of the training kernels (numba), one function per kernel: the rule
each kernel implements, written the slow and obvious way, so that a change to a kernel can be
checked against it on random inputs (tests/unit/test_training_kernels_against_references.py).

Not collected as tests (no `test_` prefix). Keep each reference the rule and nothing more: no
speed-ups, no shared code with the kernel it mirrors.
"""

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

import regex


def bpe_merges(pieces: Iterable[tuple[Sequence[int], int]], merges: int, first_id: int = 256) -> list[tuple[int, int]]:
    """Mirrors tokenmill.training.merge_learner._learn (through `learn_merges`, `learn_merges_of`
    and `learn_merges_from`): rustbpe's byte-level BPE rule on counted pieces.

    Each piece is a sequence of token ids (a byte string is its bytes, ids 0..255) with its
    count; copies of a piece add up. Every adjacent pair of a piece counts the piece's count,
    overlapping pairs too ("aaa" holds (a, a) twice). The most frequent pair (count above 0) is
    merged next, a tie going to the smaller pair (left id, then right id); the merge replaces
    the pair left to right, without overlap, in every piece, and makes token `first_id + k`.
    Stops after `merges` merges or when no pair is left. Returns the merged pairs, in order."""
    words: Counter[tuple[int, ...]] = Counter()
    for piece, count in pieces:
        words[tuple(piece)] += count
    learned: list[tuple[int, int]] = []
    while len(learned) < merges:
        pairs: Counter[tuple[int, int]] = Counter()
        for word, count in words.items():
            for pair in pairwise(word):
                pairs[pair] += count
        candidates = [pair for pair, total in pairs.items() if total > 0]
        if not candidates:
            break
        best = most_frequent(pairs, candidates)
        new_id = first_id + len(learned)
        learned.append(best)
        merged_words: Counter[tuple[int, ...]] = Counter()
        for word, count in words.items():
            merged_words[merged_word(word, best, new_id)] += count
        words = merged_words
    return learned


def most_frequent(pairs: Counter[tuple[int, int]], candidates: list[tuple[int, int]]) -> tuple[int, int]:
    """The pair `bpe_merges` merges next: the largest count, a tie to the smaller pair."""
    return min(candidates, key=lambda pair: (-pairs[pair], pair))


def merged_word(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    """The word with every occurrence of `pair`, left to right and without overlap, made `new_id`."""
    out: list[int] = []
    i = 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def preset_pieces(text: str, pattern: str) -> list[str]:
    """Mirrors tokenmill.training.splitting.scanner (`decode` and `piece_ends`, through
    `counting.split` and `split_all`): the text's pieces are `regex.findall` with the preset's
    exact pattern (tokenmill.training.patterns)."""
    return regex.findall(pattern, text)


def preset_counts(texts: Iterable[str], pattern: str) -> Counter[str]:
    """Mirrors tokenmill.training.splitting.piece_table (`codes`, `count`, `rehashed`,
    `counts_by_number`, through `counting.PieceCounter`): how often each piece of the texts
    occurs, a `Counter` of `regex.findall`'s pieces, its keys in the order first seen."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(regex.findall(pattern, text))
    return counts
