"""DESIGN §6 metrics against numbers worked out by hand on tiny tokenizations."""

import math

import numpy as np
import pytest

from tokenmill.corpora.words import PER_CHARACTER, WHITESPACE
from tokenmill.evaluation import metrics
from tokenmill.evaluation.metrics import MetricsAccumulator, continued_words
from tokenmill.evaluation.reports import premium

UNK = 0
BYTE_IDS = frozenset(range(100, 356))  # <0x00> … <0xFF>, as a byte-fallback vocabulary has

# Four lines tokenized by hand: (line, ids, spans, round trip ok).
LINES = [
    # the | " c" "at" | " sat": "cat" is cut in two. 4 tokens, 3 words, 11 chars, 11 bytes.
    ("the cat sat", [1, 2, 3, 4], [(0, 3), (3, 5), (5, 7), (7, 11)], True),
    # h, é as two byte-fallback tokens (both span the é), llo: 4 tokens, 1 word, 5 chars,
    # 6 bytes (é is 2 bytes in UTF-8).
    ("héllo", [5, 100, 101, 6], [(0, 1), (1, 2), (1, 2), (2, 5)], True),
    # One token over both characters: 2 words (one per Han character), neither is cut.
    # 1 token, 2 chars, 6 bytes.
    ("東京", [7], [(0, 2)], True),
    # An unknown word: 1 token, 1 word, 3 chars, 3 bytes; it cannot decode back.
    ("zzz", [UNK], [(0, 3)], False),
]


def accumulate(lines, vocab_size=400, **kwargs) -> dict:
    acc = MetricsAccumulator(vocab_size, unk_id=UNK, byte_fallback_ids=BYTE_IDS, **kwargs)
    for line, ids, spans, ok in lines:
        acc.add(line, ids, spans, ok)
    return acc.result()


def test_counts_and_ratios_by_hand():
    r = accumulate(LINES)
    assert r["tokens"] == 4 + 4 + 1 + 1 == 10
    assert r["words"] == 3 + 1 + 2 + 1 == 7
    assert r["characters"] == 11 + 5 + 2 + 3 == 21
    assert r["bytes"] == 11 + 6 + 6 + 3 == 26
    assert r["fertility"] == pytest.approx(10 / 7)
    assert r["chars_per_token"] == pytest.approx(21 / 10)
    assert r["bytes_per_token"] == pytest.approx(26 / 10)
    # "cat" (2 tokens) and "héllo" (4 tokens) are continued; "東" and "京" share one token.
    assert r["continued_word_rate"] == pytest.approx(2 / 7)
    assert r["unk_rate"] == pytest.approx(1 / 10)
    assert r["byte_fallback_rate"] == pytest.approx(2 / 10)
    assert r["roundtrip_rate"] == pytest.approx(3 / 4)
    # ids 0, 1, 2, 3, 4, 5, 6, 7, 100, 101: ten distinct of 400.
    assert r["vocab_utilization"] == pytest.approx(10 / 400)
    # Ten distinct ids seen once each: uniform, so both entropies are ln 10.
    assert r["shannon_efficiency"] == pytest.approx(math.log(10) / math.log(400))
    assert r["renyi_efficiency"] == pytest.approx(math.log(10) / math.log(400))
    assert r["word_rule"] == PER_CHARACTER


def test_result_has_exactly_the_design_keys():
    # Plus the clipped per-id counts behind the cost report's ghost tokens (tokenmill.evaluation.token_counts),
    # and the intervals over documents (with how many documents they rest on).
    assert set(accumulate(LINES)) - {"token_counts", "documents", "fertility_ci95", "chars_per_token_ci95"} == {
        "tokens", "words", "characters", "bytes", "fertility", "chars_per_token",
        "bytes_per_token", "continued_word_rate", "unk_rate", "byte_fallback_rate",
        "roundtrip_rate", "vocab_utilization", "shannon_efficiency", "renyi_efficiency",
        "word_rule",
    }  # fmt: skip


def test_whitespace_rule_when_no_no_space_character_is_seen():
    r = accumulate([LINES[0], LINES[1]])
    assert r["word_rule"] == WHITESPACE
    assert r["words"] == 4


def test_entropies_of_a_skewed_distribution():
    # ids 0, 0, 0, 1 over a vocabulary of 4: p = (3/4, 1/4).
    acc = MetricsAccumulator(4)
    acc.add("a b c d", [0, 0, 0, 1], [(0, 1), (2, 3), (4, 5), (6, 7)], True)
    r = acc.result()
    # Shannon: -(0.75 ln 0.75 + 0.25 ln 0.25) = 0.215762 + 0.346574 = 0.562335 nats.
    # Rényi α = 2.5: ln(0.75^2.5 + 0.25^2.5) / (1 - 2.5) = ln(0.487139 + 0.03125) / -1.5
    #              = ln(0.518389) / -1.5 = -0.657029 / -1.5 = 0.438019 nats.
    # Both over ln 4 = 1.386294.
    assert r["shannon_efficiency"] == pytest.approx(0.562335 / 1.386294, abs=1e-6)
    assert r["renyi_efficiency"] == pytest.approx(0.438019 / 1.386294, abs=1e-6)
    # Independently, with math: H_α = log(Σ p^α) / (1 - α).
    renyi = math.log(0.75**2.5 + 0.25**2.5) / (1 - 2.5)
    assert r["renyi_efficiency"] == pytest.approx(renyi / math.log(4))
    assert r["vocab_utilization"] == pytest.approx(2 / 4)


def test_a_single_repeated_token_has_zero_entropy():
    acc = MetricsAccumulator(10)
    acc.add("aaa", [3, 3, 3], [(0, 1), (1, 2), (2, 3)], True)
    r = acc.result()
    assert r["shannon_efficiency"] == 0.0 and r["renyi_efficiency"] == 0.0
    assert r["continued_word_rate"] == 1.0  # one word, three tokens


def test_empty_input_gives_zeros_not_errors():
    r = MetricsAccumulator(0).result()
    assert r["tokens"] == r["words"] == r["characters"] == r["bytes"] == 0
    for key in ["fertility", "chars_per_token", "continued_word_rate", "unk_rate",
                "roundtrip_rate", "vocab_utilization", "shannon_efficiency"]:  # fmt: skip
        assert r[key] == 0.0
    assert r["word_rule"] == WHITESPACE


def test_empty_line_counts_for_round_trip_only():
    acc = MetricsAccumulator(10)
    acc.add("", [], [], True)
    acc.add("ab", [1], [(0, 2)], False)
    r = acc.result()
    assert (r["tokens"], r["words"], r["characters"], r["bytes"]) == (1, 1, 2, 2)
    assert r["roundtrip_rate"] == 0.5


def test_ids_past_the_vocabulary_are_tokens_but_not_utilization():
    # Vocabulary of 4; id 9 (an added token) appears twice and is the unk id.
    acc = MetricsAccumulator(4, unk_id=9)
    acc.add("a b c d", [0, 1, 9, 9], [(0, 1), (2, 3), (4, 5), (6, 7)], True)
    r = acc.result()
    assert r["tokens"] == 4
    assert r["vocab_utilization"] == pytest.approx(2 / 4)
    assert r["unk_rate"] == pytest.approx(2 / 4)


def test_bad_input_is_refused():
    acc = MetricsAccumulator(4)
    with pytest.raises(ValueError):
        acc.add("ab", [1, 2], [(0, 1)], True)
    with pytest.raises(ValueError):
        acc.add("ab", [-1], [(0, 2)], True)
    assert acc.result()["tokens"] == 0  # nothing of the refused lines was kept


def test_spans_are_clipped_to_their_line():
    # A span running past "ab" must not reach "cd" on the next line, or "cd" would look cut.
    acc = MetricsAccumulator(4)
    acc.add("ab", [1], [(0, 99)], True)
    acc.add("cd", [2], [(0, 2)], True)
    assert acc.result()["continued_word_rate"] == 0.0


def test_batches_give_the_same_numbers_as_one_pass(monkeypatch):
    lines = LINES * 7
    whole = accumulate(lines)
    monkeypatch.setattr(metrics, "_BATCH_SIZE", 1)  # flush after every line
    assert accumulate(lines) == whole
    assert whole["continued_word_rate"] == pytest.approx(14 / 49)


def test_continued_words_on_arrays():
    words = np.array([[0, 3], [4, 7], [8, 11]])
    # Word 0: one token over it and word 1 ([2, 5) spans both). Word 1: [2, 5) and [5, 7).
    # Word 2: a token ending exactly at its start does not overlap it; [8, 11) is alone.
    tokens = np.array([[0, 2], [2, 5], [5, 8], [8, 11]])
    line = (np.array([4]), np.array([0]), np.array([11]))  # tokens, start and length of the one line
    assert continued_words(words, tokens, *line) == 2
    assert continued_words(words, np.zeros((0, 2), dtype=np.int64), np.array([0]), *line[1:]) == 0
    # Spans are clipped to their line, and shifted by where it starts.
    two_lines = (np.array([2, 2]), np.array([0, 4]), np.array([3, 7]))
    assert continued_words(words, np.array([[0, 2], [2, 9], [0, 2], [2, 3]]), *two_lines) == 2


def chunk_tokenize(line: str) -> tuple[list[int], list[tuple[int, int]]]:
    """A toy tokenizer: every word in chunks of 3 characters; ids do not matter here."""
    spans = []
    offset = 0
    for word in line.split(" "):
        spans += [(offset + i, offset + min(i + 3, len(word))) for i in range(0, len(word), 3)]
        offset += len(word) + 1
    return list(range(len(spans))), spans


def test_premium_on_a_parallel_pair():
    parallel = {
        # The(1) boy(1) plays(2) in(1) the(1) garden.(3) = 9; I(1) read(2) books.(2) = 5.
        "eng": ["The boy plays in the garden.", "I read books."],
        # El(1) niño(2) juega(2) en(1) el(1) jardín.(3) = 10; Yo(1) leo(1) libros.(3) = 5.
        "spa": ["El niño juega en el jardín.", "Yo leo libros."],
    }
    tokens = {}
    for lang, lines in parallel.items():
        acc = MetricsAccumulator(16)
        for line in lines:
            ids, spans = chunk_tokenize(line)
            acc.add(line, ids, spans, True)
        tokens[lang] = acc.result()["tokens"]
    assert tokens == {"eng": 9 + 5, "spa": 10 + 5}
    assert premium(tokens["spa"], tokens["eng"]) == pytest.approx(15 / 14)
    assert premium(tokens["eng"], tokens["eng"]) == 1.0
    assert premium(5, 0) == 0.0


def test_add_batch_equals_adding_line_by_line_on_mixed_scripts():
    import numpy as np

    lines = ["plain English words here", "东京和北京 are cities", "", "ไทย ภาษา", "more english", "日本語のテキスト。"]
    # One token per character: spans are known without any tokenizer.
    per_line = [(list(range(len(line))), [(i, i + 1) for i in range(len(line))]) for line in lines]
    one = MetricsAccumulator(vocab_size=100)
    for line, (ids, spans) in zip(lines, per_line):
        one.add(line, [i % 100 for i in ids], spans, True)
    many = MetricsAccumulator(vocab_size=100)
    flat = np.array([i % 100 for ids, _ in per_line for i in ids], dtype=np.int64)
    spans = np.array([span for _, s in per_line for span in s], dtype=np.int64).reshape(-1, 2)
    counts = np.array([len(ids) for ids, _ in per_line], dtype=np.int64)
    many.add_batch(lines, flat, spans, counts, len(lines))
    assert many.result() == one.result()


def test_intervals_over_documents_by_hand():
    import numpy as np

    from tokenmill.evaluation.metrics import document_moments, intervals

    tokens, words, chars = np.array([2, 4, 6]), np.array([1, 2, 4]), np.array([10, 20, 30])
    out = intervals(document_moments(tokens, words, chars))
    ratio = 12 / 7  # fertility: Σt / Σw
    residuals = sum((t - ratio * w) ** 2 for t, w in zip(tokens, words))
    assert out["documents"] == 3
    assert out["fertility_ci95"] == pytest.approx(1.959964 * (3 / 2 * residuals) ** 0.5 / 7, rel=1e-6)
    assert out["chars_per_token_ci95"] == pytest.approx(0.0, abs=1e-12)  # 5 characters a token in each


def test_the_accumulator_sums_the_moments_of_its_lines():
    from tokenmill.evaluation.metrics import intervals

    r = accumulate(LINES)  # 4/3, 4/1, 1/2, 1/1 tokens per word: a spread
    assert r["documents"] == 4 and r["fertility_ci95"] > 0.5
    # Every line the same shape (two words of two letters, one token a word): no spread, no interval.
    same = accumulate([("aa bb", [1, 2], [(0, 2), (3, 5)], True), ("cc dd", [3, 4], [(0, 2), (3, 5)], True)])
    assert same["documents"] == 2 and same["fertility_ci95"] == pytest.approx(0.0, abs=1e-12)
    assert intervals(__import__("numpy").zeros(9))["fertility_ci95"] == 0.0


def _fed(lines, vocab_size=400) -> MetricsAccumulator:
    acc = MetricsAccumulator(vocab_size, unk_id=UNK, byte_fallback_ids=BYTE_IDS)
    for line, ids, spans, ok in lines:
        acc.add(line, ids, spans, ok)
    return acc


def test_sums_written_by_one_process_merge_in_another_to_the_numbers_of_one_pass():
    # Each part's sums as another worker stores them, with an id past the vocabulary (an added token) in one.
    beyond = [*LINES, ("<|x|> ok", [450, 8], [(0, 5), (5, 8)], True)]
    total = MetricsAccumulator(400, unk_id=UNK, byte_fallback_ids=BYTE_IDS)
    for part in (beyond[:2], beyond[2:3], beyond[3:]):
        total.merge(MetricsAccumulator.from_bytes(_fed(part).to_bytes(), 400, UNK, BYTE_IDS))
    assert total.result() == _fed(beyond).result()


def test_sums_of_another_vocabulary_are_refused():
    with pytest.raises(ValueError, match="400 ids"):
        MetricsAccumulator.from_bytes(_fed(LINES, vocab_size=300).to_bytes(), 400, UNK, BYTE_IDS)
