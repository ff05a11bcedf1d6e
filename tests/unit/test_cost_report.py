"""The cost report's pure parts: digit grouping, the fixed texts against tiktoken itself, packed
per-id counts and the ghost-token aggregation over them."""

import numpy as np
import pytest

from tokenmill.evaluation.metrics import MetricsAccumulator
from tokenmill.evaluation.references import load_reference
from tokenmill.evaluation.token_counts import CLIP, MAX_CHARS, combined_counts, pack_counts, unpack_counts
from tokenmill.playground.cost_probes import (
    INDENTS,
    NUMBERS,
    TRAILING,
    UNINDENTED,
    digit_pattern,
    grouping_consistency,
    grouping_numbers,
    probe,
)
from tokenmill.playground.cost_report import ghost_summary, is_base_token, reference_probes


def characters(text: str) -> list[tuple[int, int]]:
    """A tokenizer that cuts every character apart."""
    return [(i, i + 1) for i in range(len(text))]


def pairs(text: str) -> list[tuple[int, int]]:
    """A tokenizer that cuts text into pairs of characters from the left."""
    return [(i, min(i + 2, len(text))) for i in range(0, len(text), 2)]


# ---- digit grouping --------------------------------------------------------------------------

def test_digit_patterns_count_digits_per_piece_and_skip_pieces_without_any():
    assert digit_pattern(["199", "9"]) == (3, 1)
    assert digit_pattern(["$", "19", ".", "99"]) == (2, 2)
    assert digit_pattern(["in", " 2024"]) == (4,)
    assert digit_pattern(["abc"]) == ()


def test_grouping_consistency_is_the_share_of_numbers_cut_like_most_of_their_length():
    result = grouping_consistency({4: [(3, 1), (3, 1), (2, 2)], 5: [(3, 2), (3, 2)], 6: []})
    assert result["consistency"] == pytest.approx(4 / 5)
    four, five = result["lengths"]
    assert (four["digits"], four["pattern"], four["share"], four["patterns"], four["numbers"]) == (4, "3+1", 2 / 3, 2, 3)
    assert (five["pattern"], five["share"]) == ("3+2", 1.0)
    assert grouping_consistency({})["consistency"] == 0.0


def test_the_grouping_numbers_are_fixed_and_have_their_length():
    numbers = grouping_numbers()
    assert numbers == grouping_numbers()  # the same every call: reports stay comparable
    for length, group in numbers.items():
        assert len(group) == 12 and all(len(n) == length and n.isdigit() for n in group)
        assert group[:3] == [str(10 ** (length - 1)), "1" + "9" * (length - 1), "9" * length]


def test_a_tokenizer_cutting_every_digit_is_perfectly_consistent_and_splits_every_word():
    result = probe(characters)
    assert result["digit_grouping"]["consistency"] == 1.0
    assert result["digit_grouping"]["lengths"][2]["pattern"] == "1+1+1+1"
    assert result["split_share"] == 1.0
    assert result["words"][0]["pieces"] == list("strawberry")  # the space before it is a token of its own, not the word's
    assert result["trailing_space"]["extra_tokens"] == 1 and result["trailing_space"]["last_piece"] == " "


def test_pairs_from_the_left_are_consistent_per_length_but_not_aligned():
    lengths = {row["digits"]: row["pattern"] for row in probe(pairs)["digit_grouping"]["lengths"]}
    assert lengths[4] == "2+2" and lengths[5] == "2+2+1"


# ---- the fixed texts under the references, checked against tiktoken directly -------------------

@pytest.fixture(scope="module")
def references():
    return dict(reference_probes())


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_indentation_counts_are_tiktokens_own(references, name):
    enc = load_reference(name)
    rows = references[name]["indentation"]
    assert [row["text"] for row in rows] == [text for _, text in INDENTS]
    for row in rows:
        assert row["tokens"] == len(enc.encode_ordinary(row["text"]))
        assert row["indent_tokens"] == row["tokens"] - len(enc.encode_ordinary(UNINDENTED))
        assert "".join(row["pieces"]) == row["text"]


def test_indentation_as_the_article_counts_it(references):
    # GPT-2 spends a token per space (4 spaces: 5 tokens, 8: 9); cl100k has runs of spaces.
    assert [row["tokens"] for row in references["gpt2"]["indentation"][:3]] == [5, 9, 13]
    assert [row["tokens"] for row in references["cl100k_base"]["indentation"][:3]] == [3, 3, 3]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base", "o200k_base"])
def test_numbers_and_the_trailing_space_match_tiktoken(references, name):
    enc = load_reference(name)
    for row, text in zip(references[name]["numbers"], NUMBERS):
        assert row["text"] == text
        assert row["pieces"] == [enc.decode_single_token_bytes(i).decode() for i in enc.encode_ordinary(text)]
    trailing = references[name]["trailing_space"]
    assert [trailing["without"]["text"], trailing["with"]["text"]] == list(TRAILING)
    assert trailing["extra_tokens"] == len(enc.encode_ordinary(TRAILING[1])) - len(enc.encode_ordinary(TRAILING[0])) == 1


def test_the_articles_cuts(references):
    cl100k = {row["text"]: row["pieces"] for row in references["cl100k_base"]["numbers"]}
    assert cl100k["1000"] == ["100", "0"] and cl100k["10000"] == ["100", "00"] and cl100k["19999"] == ["199", "99"]
    assert references["cl100k_base"]["digit_grouping"]["consistency"] == 1.0  # \p{N}{1,3}: always 3+3+…
    assert references["gpt2"]["digit_grouping"]["consistency"] < 0.8  # merges learned per number
    words = {w["text"]: w["pieces"] for w in references["gpt2"]["words"]}
    assert words["ferrocarril"] == [" fer", "roc", "arr", "il"]
    assert words["SolidGoldMagikarp"] == [" SolidGoldMagikarp"]  # one token in GPT-2 …
    assert len({w["text"]: w for w in references["cl100k_base"]["words"]}["SolidGoldMagikarp"]["pieces"]) > 1  # … not after


# ---- packed per-id counts ----------------------------------------------------------------------

@pytest.mark.parametrize("size", [0, 1, 5, 4096, 50_257])
def test_packed_counts_unpack_to_the_clipped_counts(size):
    counts = np.random.default_rng(size).integers(0, 7, size)
    packed = pack_counts(counts)
    assert packed.startswith(f"c{CLIP}/{size}/")
    assert np.array_equal(unpack_counts(packed), np.minimum(counts, CLIP))


def test_combined_counts_are_exact_below_the_clip():
    rng = np.random.default_rng(1)
    parts = [rng.integers(0, 3, 1000) for _ in range(3)]  # ids seen 0, 1 or 2 times in each of three corpora
    combined = combined_counts([pack_counts(p) for p in parts])
    assert np.array_equal(combined, np.minimum(sum(parts), CLIP))
    assert len(combined_counts([pack_counts(np.zeros(10)), pack_counts(np.zeros(8))])) == 8  # the shortest
    assert len(combined_counts([])) == 0


def test_counts_that_do_not_fit_are_not_kept():
    noisy = np.random.default_rng(2).integers(0, 4, 4 * MAX_CHARS)  # incompressible, ~85 kB packed
    assert pack_counts(noisy) is None
    assert len(unpack_counts(pack_counts(np.full(1_000_000, 5)))) == 1_000_000  # large but uniform: it compresses


def test_packed_counts_of_another_packing_are_refused():
    with pytest.raises(ValueError, match="c9"):
        unpack_counts("c9/4/" + pack_counts(np.zeros(4)).split("/", 2)[2])


def test_the_metrics_keep_each_ids_clipped_count():
    acc = MetricsAccumulator(10)
    acc.add("aaa b", [1, 1, 1, 2], [(0, 1), (1, 2), (2, 3), (4, 5)], True)
    acc.add("c", [3, 3, 1], [(0, 1), (0, 1), (0, 1)], True)
    result = acc.result()
    assert unpack_counts(result["token_counts"]).tolist() == [0, 3, 1, 2, 0, 0, 0, 0, 0, 0]


# ---- ghost tokens ------------------------------------------------------------------------------

def test_ghosts_are_learned_entries_seen_fewer_than_the_clip_special_tokens_aside():
    #            id: 0  1  2  3  4  5  6  7
    counts = np.array([0, 3, 0, 1, 2, 0, 3, 0])
    excluded = np.array([True, False, False, False, False, False, False, False])  # 0: a special token
    base = np.array([False, True, True, False, False, False, False, False])  # 1, 2: single bytes
    result = ghost_summary(counts, excluded, base, listed=10)
    assert result["entries"] == 7
    assert (result["never"], result["rare"]) == (3, 5)  # never: 2, 5, 7; rare adds 3 and 4
    assert (result["learned_never"], result["learned_rare"], result["base_never"]) == (2, 4, 1)
    assert result["listed"] == [(5, 0), (7, 0), (3, 1), (4, 2)]  # never seen first, then by id
    assert result["never_share"] == pytest.approx(3 / 7)
    assert ghost_summary(counts, excluded, base, listed=1)["listed"] == [(5, 0)]


def test_ghost_aggregation_over_corpora_takes_a_token_seen_once_in_each_of_three_as_seen():
    per_corpus = [np.array([1, 0, 0, 5]), np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0])]
    combined = combined_counts([pack_counts(c) for c in per_corpus])
    result = ghost_summary(combined, np.zeros(4, bool), np.zeros(4, bool), listed=10)
    assert result["listed"] == [(2, 0), (1, 1)]  # id 0 adds up to 3 over the corpora: not a ghost


@pytest.mark.parametrize(("token", "byte_level", "base"), [
    ("Ġ", True, True), ("a", True, True), ("Ġthe", True, False), ("Ã©", True, False),
    ("<0xE2>", False, True), ("▁", False, True), ("▁a", False, True), ("▁ab", False, False),
    ("##s", False, True), ("##ing", False, False), ("é", False, True), ("<|endoftext|>", True, False),
])
def test_base_tokens_are_single_bytes_or_characters(token, byte_level, base):
    assert is_base_token(token, byte_level) is base
