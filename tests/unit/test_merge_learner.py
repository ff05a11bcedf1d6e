"""Merges learned from counted pieces are rustbpe's merges on the texts the pieces came from."""

import random
from collections import Counter

import pytest
import regex
import rustbpe

from tests.unit.kernel_references import merged_word
from tokenmill.training import merge_learner
from tokenmill.training.patterns import PATTERNS

WORDS = ["the", "there", "then", "low", "lower", "lowest", "día", "niño", "日本語", "東京", "добрый", "مرحبا",
         "1999", "2026", "3.14", "  ", "\t", "def", "return", "x_1", "(a+b)", "aaaa", "abab", "!!", "🙂"]


def learn_merges(pieces: list[tuple[bytes, int]], merges: int) -> list[bytes]:
    """Every token the learner makes, in rank order, as rustbpe's ranks list them."""
    tokens = [bytes([byte]) for byte in range(256)]
    for left, right in merge_learner.learn_merges(pieces, merges):
        assert left in tokens and right in tokens  # a merge is of two earlier tokens
        tokens.append(left + right)
    return tokens


def _texts(seed: int, lines: int = 400) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 20))) + rng.choice(["", " ", "\n  x"])
            for _ in range(lines)]


def _rustbpe(texts: list[str], pattern: str, vocab: int) -> list[bytes]:
    learner = rustbpe.Tokenizer()
    learner.train_from_iterator(iter(texts), vocab, pattern=pattern)
    return [bytes(token) for token, _ in sorted(learner.get_mergeable_ranks(), key=lambda item: item[1])]


def _counted(texts: list[str], pattern: str) -> list[tuple[bytes, int]]:
    compiled = regex.compile(pattern)
    counts = Counter(piece for text in texts for piece in compiled.findall(text))
    return [(piece.encode(), seen) for piece, seen in counts.items()]


@pytest.mark.parametrize("preset", ["gpt2", "cl100k", "o200k"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_merges_are_rustbpes(preset, seed):
    texts = _texts(seed)
    pattern = PATTERNS[preset]
    vocab = 256 + 300
    assert learn_merges(_counted(texts, pattern), vocab - 256) == _rustbpe(texts, pattern, vocab)


def test_overlapping_pairs_and_ties_follow_rustbpe():
    # Runs of one letter hold overlapping pairs; many pairs tie at every count.
    texts = ["a" * n + " " + "b" * (7 - n) for n in range(8)] * 3 + ["abab cdcd abcd dcba"] * 2
    pattern = PATTERNS["gpt2"]
    assert learn_merges(_counted(texts, pattern), 40) == _rustbpe(texts, pattern, 256 + 40)


def test_it_stops_when_no_pair_is_left_and_ignores_order_of_the_pieces():
    counted = [(b"ab", 3), (b"c", 9), (b"abc", 1)]
    tokens = learn_merges(counted, 100)
    assert tokens[256:] == [b"ab", b"abc"]
    assert learn_merges(list(reversed(counted)), 100) == tokens


def test_many_pairs_grow_the_hash_table_and_still_give_rustbpes_merges():
    # Twelve thousand merges over words of 3,000 CJK characters number ~74,000 pairs, past the
    # first 65,536 the hash table holds half full: it grows, and the lists of pieces are
    # compacted many times along the way.
    rng = random.Random(7)
    letters = [chr(code) for code in range(0x4E00, 0x4E00 + 3000)]  # three UTF-8 bytes each
    words = ["".join(rng.choice(letters) for _ in range(rng.randrange(1, 5))) for _ in range(20000)]
    texts = [" ".join(rng.choice(words) for _ in range(12)) for _ in range(5000)]
    pattern = PATTERNS["gpt2"]
    assert learn_merges(_counted(texts, pattern), 12000) == _rustbpe(texts, pattern, 256 + 12000)


def test_both_symbol_widths_learn_the_same_merges():
    # Up to 65,536 ids the symbols are 2 bytes, past it 4: asking for more merges than can be
    # made switches the width, and the learning, which stops when no pair is left, is the same.
    import numpy as np

    counted = _counted(_texts(3), PATTERNS["gpt2"])
    assert merge_learner._symbol_type(256 + 2000) is np.uint16
    assert merge_learner._symbol_type(256 + 70000) is np.int32
    narrow = learn_merges(counted, 2000)
    assert 256 < len(narrow) < 256 + 2000  # every pair merged before the 2,000th merge
    assert learn_merges(counted, 70000) == narrow


def test_compaction_keeps_the_runs_of_the_pairs_still_counted_in_order():
    import numpy as np

    pieces = [b"abcab", b"bcabc", b"cab", b"abab", b"ca"] * 3
    symbols = np.frombuffer(b"".join(pieces), dtype=np.uint8).astype(np.uint16)
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    table = merge_learner.Pieces(symbols, merge_learner._rows(lengths, np.ones(len(pieces), dtype=np.int64)))
    pairs, numbered, used = merge_learner._first_pairs(table)

    def runs() -> dict[int, list[int]]:
        return {n: list(pairs.pieces_of[pairs.run_starts[n]:pairs.run_starts[n] + pairs.run_lengths[n]])
                for n in range(numbered) if pairs.counts[n] > 0}

    before = runs()
    assert len(before) == numbered > 2
    pairs.counts[0] = pairs.counts[numbered - 1] = 0  # counted out: their runs may go
    kept = {n: run for n, run in before.items() if n not in (0, numbered - 1)}
    now = merge_learner._compacted(pairs, numbered, used)
    assert now == sum(len(run) for run in kept.values()) < used
    assert runs() == kept
    assert pairs.run_starts[1] == 0  # moved to the front


def test_a_piece_given_in_several_copies_counts_as_their_sum():
    # As two counting processes give it: the copies are added up, and the merges are the same.
    texts = _texts(5)
    counted = _counted(texts, PATTERNS["gpt2"])
    split = [(piece, seen - seen // 2) for piece, seen in counted] + [(piece, seen // 2) for piece, seen in counted]
    random.Random(1).shuffle(split)
    assert learn_merges(split, 300) == learn_merges(counted, 300)
    assert learn_merges(counted + counted, 300) == learn_merges([(p, 2 * seen) for p, seen in counted], 300)


def test_learning_from_ids_continues_a_state():
    import numpy as np

    from tokenmill.training.merge_learner import learn_merges, learn_merges_from

    pieces = [(b"hello", 5), (b" hello", 7), (b"yellow", 3), (b"low", 9), (b" world", 4)]
    by_bytes = learn_merges(pieces, 12)
    symbols = np.frombuffer(b"".join(p for p, _ in pieces), dtype=np.uint8).astype(np.int32)
    lengths = np.array([len(p) for p, _ in pieces], dtype=np.int64)
    counts = np.array([c for _, c in pieces], dtype=np.int64)
    by_ids = learn_merges_from(symbols, lengths, counts, 256, 12)
    tokens = [bytes([b]) for b in range(256)]
    for left, right in by_ids:
        tokens.append(tokens[left] + tokens[right])
    assert [(tokens[a], tokens[b]) for a, b in by_ids] == by_bytes
    # From a later state: the first merges already made (their tokens given as ids), the rest the same.
    made = {pair: 256 + k for k, pair in enumerate(by_ids[:4])}
    state = []
    for piece, _ in pieces:
        ids = tuple(piece)
        for pair, new in made.items():
            ids = merged_word(ids, pair, new)
        state.append(ids)
    later = learn_merges_from(np.array([i for ids in state for i in ids], dtype=np.int32),
                              np.array([len(ids) for ids in state], dtype=np.int64), counts, 260, 8)
    assert later == [(a, b) for a, b in by_ids[4:]]


def test_pieces_past_what_32_bit_numbers_hold_are_refused_before_any_learning():
    import numpy as np

    # A piece of n symbols holds n - 1 positions of pairs; the learner numbers up to three times
    # the positions (`_bounds`) in 32 bits. One position more than that holds is refused, before
    # anything is allocated for it (lengths alone: no bytes are needed to refuse them).
    most = (2**31 - 1) // 3
    rows = merge_learner._rows(np.array([most + 1], dtype=np.int64), np.ones(1, dtype=np.int64))
    assert rows.tolist() == [[0, most + 1, 1]]
    with pytest.raises(ValueError, match="numbered in 32 bits"):
        merge_learner._rows(np.array([most + 2], dtype=np.int64), np.ones(1, dtype=np.int64))
