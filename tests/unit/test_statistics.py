"""Corpus statistics at upload: hapax, OOV, Zipf and Heaps on texts with known answers."""

import itertools

import pytest

from tokenmill.corpora.statistics import CorpusStatistics


def statistics_of(lines, total_lines=None) -> CorpusStatistics:
    stats = CorpusStatistics(total_lines=total_lines)
    for line in lines:
        stats.add(line)
    return stats


def test_distinct_words_and_hapax_share_on_lowercased_whitespace_words():
    # the ×2, cat ×2, sat ×2, dog, down, a: 6 distinct, 3 seen once → 3/6.
    r = statistics_of(["The cat sat", "the dog SAT down", "a cat"]).result()
    assert r["distinct_words"] == 6
    assert r["hapax_share"] == pytest.approx(3 / 6)


def test_punctuation_stays_on_the_word_as_in_the_seed_article():
    # "cat." and "cat" are different words: the ×2, cat., cat → 3 distinct, 2 hapax.
    r = statistics_of(["The cat.", "the cat"]).result()
    assert (r["distinct_words"], r["hapax_share"]) == (3, pytest.approx(2 / 3))


TEN_LINES = [
    "the cat sat on the mat",
    "the dog sat",
    "a cat and a dog",
    "on the mat",
    "the old cat",
    "a dog",
    "sat on",
    "the mat",
    "old dog",
    # The last tenth: 6 words; "novel" ×2 and "zebra" were never seen in lines 1-9,
    # "the", "old" and "cat" were. OOV = 3 / 6.
    "novel the novel old zebra cat",
]


@pytest.mark.parametrize("total_lines", [None, 10])
def test_oov_rate_of_the_last_tenth(total_lines):
    assert statistics_of(TEN_LINES, total_lines).result()["oov_rate"] == pytest.approx(3 / 6)


def test_oov_rate_is_zero_without_a_last_tenth():
    # Nine lines: the last tenth rounds down to no line at all.
    assert statistics_of(TEN_LINES[:9]).result()["oov_rate"] == 0.0
    assert statistics_of([]).result()["oov_rate"] == 0.0


def test_a_wrong_line_count_is_refused():
    stats = statistics_of(TEN_LINES, total_lines=11)
    with pytest.raises(ValueError):
        stats.result()


def brute_force_oov(lines: list[str]) -> float:
    head = len(lines) - len(lines) // 10
    seen = {word for line in lines[:head] for word in line.lower().split()}
    tail = [word for line in lines[head:] for word in line.lower().split()]
    return sum(word not in seen for word in tail) / len(tail) if tail else 0.0


def test_streaming_oov_matches_a_brute_force_split_at_every_length():
    # Words drift with the line number, so new words keep arriving; some lines are empty.
    lines = [
        " ".join(f"w{(i * 7 + j) % (i // 3 + 5)}x{i // 50}" for j in range(i % 6))
        for i in range(700)
    ]
    stats = CorpusStatistics()
    for n, line in enumerate(lines, start=1):
        stats.add(line)
        if n % 37 == 0 or n == len(lines):  # result() in mid-stream must stay exact
            assert stats.result()["oov_rate"] == pytest.approx(brute_force_oov(lines[:n]))
    assert stats.result()["oov_rate"] > 0  # the data does exercise OOV


def power_law_lines(frequencies: list[int]) -> list[str]:
    return [" ".join([f"w{rank}"] * count) for rank, count in enumerate(frequencies, start=1)]


def test_zipf_exponent_of_exact_power_laws():
    # f(r) = 2520 / r for r = 1..10 (2520 divides by each): every point on a line of slope -1.
    freqs = [2520 // r for r in range(1, 11)]
    stats = statistics_of(power_law_lines(freqs))
    assert stats.result()["zipf_exponent"] == pytest.approx(1.0)
    # Ranks 1, 3, 10 (geomspace(1, 10, 3) = 1, 3.16, 10, rounded).
    assert stats.zipf_points(max_points=3) == [(1, 2520), (3, 840), (10, 252)]
    # f(r) = 3600 / r² for r = 1..6 (3600 divides by each square): slope -2.
    freqs = [3600 // r**2 for r in range(1, 7)]
    assert statistics_of(power_law_lines(freqs)).result()["zipf_exponent"] == pytest.approx(2.0)


def heaps_lines(lines: int, new_per_line, words_per_line) -> list[str]:
    """Line k brings new_per_line(k) unseen words, padded with a repeated old one."""
    out, fresh = [], 0
    for k in range(1, lines + 1):
        new = [f"n{fresh + i}" for i in range(new_per_line(k))]
        fresh += len(new)
        out.append(" ".join(new + ["n0"] * (words_per_line(k) - len(new))))
    return out


def test_heaps_fit_on_an_exact_power_law():
    # Line k: 3k² - 3k + 1 words, 2k - 1 of them new. After k lines: k³ words read and
    # k² distinct, so distinct = 1 · read^(2/3) at every line end: K = 1, β = 2/3.
    stats = statistics_of(heaps_lines(30, lambda k: 2 * k - 1, lambda k: 3 * k * k - 3 * k + 1))
    r = stats.result()
    assert r["heaps_beta"] == pytest.approx(2 / 3)
    assert r["heaps_k"] == pytest.approx(1.0)
    # Lines grow faster than the 2^(1/16) sampling step, so every line end is a sample.
    assert stats.heaps_points(max_points=None) == [(k**3, k**2) for k in range(1, 31)]
    # Thinned evenly by index: samples 1, 11, 20, 30 (linspace(1, 30, 4) rounded).
    assert stats.heaps_points(max_points=4) == [(1, 1), (1331, 121), (8000, 400), (27000, 900)]


def test_heaps_k_and_beta_on_a_second_power_law():
    # Line k: 9(2k - 1) words, 9 new. After k lines: 9k² read, 9k distinct = 3 · (9k²)^0.5.
    stats = statistics_of(heaps_lines(25, lambda k: 9, lambda k: 9 * (2 * k - 1)))
    r = stats.result()
    assert r["heaps_beta"] == pytest.approx(0.5)
    assert r["heaps_k"] == pytest.approx(3.0)


def test_heaps_samples_are_geometric_and_bounded():
    # One new word per line: distinct = read, K = 1, β = 1; 4000 lines give far fewer
    # samples than lines (16 per doubling once a step exceeds one word).
    stats = statistics_of([f"w{i}" for i in range(4000)])
    points = stats.heaps_points(max_points=None)
    assert 100 < len(points) < 250
    assert points[-1] == (4000, 4000)
    ratios = [b[0] / a[0] for a, b in itertools.pairwise(points[50:-1])]
    assert all(1.0 < ratio < 1.1 for ratio in ratios)
    r = stats.result()
    assert (r["heaps_beta"], r["heaps_k"]) == (pytest.approx(1.0), pytest.approx(1.0))
    assert len(stats.heaps_points()) <= 200


def test_empty_corpus_gives_zeros():
    r = CorpusStatistics().result()
    assert r == {
        "distinct_words": 0,
        "hapax_share": 0.0,
        "zipf_exponent": 0.0,
        "heaps_k": 0.0,
        "heaps_beta": 0.0,
        "oov_rate": 0.0,
        "duplicate_documents": 0,
        "duplicate_share": 0.0,
    }
    assert CorpusStatistics().document_hashes().tolist() == []
    assert CorpusStatistics().zipf_points() == [] == CorpusStatistics().heaps_points()
