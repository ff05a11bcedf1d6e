"""The BPE step-through (tokenmill.playground.bpe_steps): the seed article's worked example step by step, the
`tokenizers` tie-break against the real library, windows of states, and the bounds.

The article (/work/shared/seeds/004_*) trains on low×5 lowest×2 newer×6 wider×3 new×2 with an
end-of-word marker "·" of its own, shows the top of the first pair count, says "e r and r · tie
at 9; BPE breaks the tie deterministically (first pair seen), so merge 1 is e + r → er", and
gives the loop that learns the rest (its widget counts 16 merges). `article_merges` below is
that loop, as printed there, run as the oracle.
"""

import itertools
import json
from collections import Counter

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tests.text import flores_lines
from tokenmill.errors import InvalidInput
from tokenmill.playground.bpe_steps import (
    DEFAULT_CORPUS,
    END_OF_WORD,
    MAX_CHARACTERS,
    MAX_STEPS,
    corpus_words,
    count_pairs,
    merge_tokens,
    step_through,
)


def article_merges(limit: int = 100) -> list[tuple[str, str]]:
    """The article's own code (its vocab, pair_counts, merge and loop), with "</w>" written "·"."""
    vocab = {("l", "o", "w", "·"): 5, ("l", "o", "w", "e", "s", "t", "·"): 2,
             ("n", "e", "w", "e", "r", "·"): 6, ("w", "i", "d", "e", "r", "·"): 3, ("n", "e", "w", "·"): 2}

    def pair_counts(vocab):
        pairs = Counter()
        for word, freq in vocab.items():
            for a, b in itertools.pairwise(word):
                pairs[(a, b)] += freq
        return pairs

    def merge(vocab, a, b):
        out = {}
        for word, freq in vocab.items():
            w, i = [], 0
            while i < len(word):
                if i < len(word) - 1 and word[i] == a and word[i + 1] == b:
                    w.append(a + b)
                    i += 2
                else:
                    w.append(word[i])
                    i += 1
            out[tuple(w)] = freq
        return out

    merges = []
    for _ in range(limit):
        pairs = pair_counts(vocab)
        if not pairs or max(pairs.values()) < 2:
            break
        (a, b), _n = pairs.most_common(1)[0]
        merges.append((a, b))
        vocab = merge(vocab, a, b)
    return merges


def tokenizers_merges(text: str, end_of_word: bool) -> list[tuple[str, str]]:
    """What tokenizers' BpeTrainer learns on the whitespace words, every pair down to count 1.

    The marker is written into the text ("low·"), so it is one more character of the
    alphabet: a symbol of its own, as in the article (the trainer's `end_of_word_suffix`
    would glue it to the last letter instead).
    """
    if end_of_word:
        text = " ".join(word + END_OF_WORD for word in text.split())
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=1_000_000, min_frequency=0, show_progress=False, special_tokens=[])
    tokenizer.train_from_iterator([text], trainer=trainer)
    return [tuple(pair) for pair in json.loads(tokenizer.to_str())["model"]["merges"]]


def pairs_of(run) -> list[tuple[str, str]]:
    return [merge.pair for merge in run.merges]


# ---- the article's worked example -------------------------------------------------------------

def test_the_first_count_is_the_articles_table():
    state = step_through(DEFAULT_CORPUS, 0).states[0]
    # "pair / count: e r 9, r · 9, w e 8, n e 8, e w 8, l o 7", and the widget's "o·w 7" after them.
    assert state.pairs[:7] == ((("e", "r"), 9), (("r", "·"), 9), (("w", "e"), 8), (("n", "e"), 8), (("e", "w"), 8),
                               (("l", "o"), 7), (("o", "w"), 7))
    # The widget's "vocabulary 11 tokens ·deilnorstw".
    assert state.vocabulary_size == 11
    assert [(w.tokens, w.count) for w in state.words] == [
        (("l", "o", "w", "·"), 5), (("l", "o", "w", "e", "s", "t", "·"), 2), (("n", "e", "w", "e", "r", "·"), 6),
        (("w", "i", "d", "e", "r", "·"), 3), (("n", "e", "w", "·"), 2)]


def test_merge_one_breaks_the_tie_by_first_pair_seen():
    run = step_through(DEFAULT_CORPUS)
    first = run.merges[0]
    assert (first.pair, first.token, first.count, first.tied) == (("e", "r"), "er", 9, (("r", "·"),))
    # "Now newer is n e w er · and wider is w i d er ·".
    after = {"".join(w.tokens): w.tokens for w in run.states[1].words}
    assert after["newer·"] == ("n", "e", "w", "er", "·")
    assert after["wider·"] == ("w", "i", "d", "er", "·")


def test_every_merge_is_the_articles_loop_in_order():
    run = step_through(DEFAULT_CORPUS)
    expected = article_merges()
    assert len(expected) == 16  # the widget's "0 / 16"
    assert pairs_of(run) == expected
    assert run.done and len(run.states) == 17 and run.states[-1].next is None
    # Every word ends as one token, and the vocabulary has grown by one per merge.
    assert [w.tokens for w in run.states[-1].words] == [("low·",), ("lowest·",), ("newer·",), ("wider·",), ("new·",)]
    assert run.vocabulary[11:] == tuple(m.token for m in run.merges)


def test_each_state_ranks_its_recounted_pairs_with_the_merge_first():
    for rule in ("first_seen", "tokenizers"):
        run = step_through(DEFAULT_CORPUS, tie_break=rule)
        for state in run.states[:-1]:
            assert dict(state.pairs) == count_pairs(state.words)  # counted afresh: the learner's counts agree
            assert state.pairs[0] == (state.next.pair, state.next.count)
            assert [c for _, c in state.pairs] == sorted((c for _, c in state.pairs), reverse=True)
            assert state.vocabulary_size == 11 + state.step


def test_min_count_stops_like_the_articles_loop():
    assert len(step_through(DEFAULT_CORPUS, min_count=3).merges) == 11  # "wider" (3×) is the last to fully merge
    assert len(step_through(DEFAULT_CORPUS, min_count=1).merges) == 16  # nothing left but whole words


# ---- the tokenizers rule ----------------------------------------------------------------------

def test_the_rules_differ_on_the_article_corpus():
    first_seen = pairs_of(step_through(DEFAULT_CORPUS, tie_break="first_seen"))
    library = pairs_of(step_through(DEFAULT_CORPUS, tie_break="tokenizers"))
    # n e and e w tie at 8 after two merges: first seen takes n e; ids take (e, w) = (1, 9) over (n, e) = (4, 1).
    assert first_seen[2] == ("n", "e") and library[2] == ("e", "w")


@pytest.mark.parametrize("end_of_word", [True, False])
def test_the_tokenizers_rule_is_what_tokenizers_learns_on_the_article_corpus(end_of_word):
    run = step_through(DEFAULT_CORPUS, tie_break="tokenizers", end_of_word=end_of_word, min_count=1)
    assert pairs_of(run) == tokenizers_merges(DEFAULT_CORPUS, end_of_word)


@pytest.mark.parametrize(("languages", "end_of_word"), [
    (("eng_Latn",), True), (("eng_Latn",), False), (("rus_Cyrl", "arb_Arab"), True), (("zho_Hans",), False),
])
def test_the_tokenizers_rule_is_what_tokenizers_learns_on_flores_lines(languages, end_of_word):
    text = " ".join(flores_lines(2, languages=languages))
    run = step_through(text, tie_break="tokenizers", end_of_word=end_of_word, min_count=1)
    expected = tokenizers_merges(text, end_of_word)[:MAX_STEPS]  # the step-through stops at MAX_STEPS
    assert len(expected) > 100 and pairs_of(run) == expected
    # The article's rule would have chosen differently somewhere on the same text.
    assert pairs_of(step_through(text, tie_break="first_seen", end_of_word=end_of_word, min_count=1)) != expected


# ---- windows and bounds -----------------------------------------------------------------------

def test_a_window_of_states_is_the_same_states(monkeypatch):
    text = " ".join(flores_lines(6, languages=("eng_Latn",)))
    whole = step_through(text, 60)
    window = step_through(text, 60, start=20, count=5)
    assert [s.step for s in window.states] == [20, 21, 22, 23, 24] and window.next_start == 25
    assert window.states == whole.states[20:25] and window.merges == whole.merges
    # Cut by the entry budget, the windows chain into every state exactly once.
    monkeypatch.setattr("tokenmill.playground.bpe_steps.MAX_ENTRIES", 2000)
    chained, start = [], 0
    while start is not None:
        part = step_through(text, 60, start=start)
        chained += part.states
        start = part.next_start
    assert chained == list(whole.states)
    assert step_through(text, 60, start=MAX_STEPS).states == whole.states[-1:]  # past the end: the last state


def test_merging_is_left_to_right_without_overlap():
    assert merge_tokens(("a", "a", "a"), ("a", "a")) == ("aa", "a")
    assert merge_tokens(("a", "a", "a", "a"), ("a", "a")) == ("aa", "aa")
    run = step_through("aaa", end_of_word=False, min_count=1)
    assert [m.count for m in run.merges] == [2, 1]  # both overlapping (a, a) count; "aa a" then "aaa"


@pytest.mark.parametrize(("call", "field"), [
    (lambda: step_through("a " * (MAX_CHARACTERS // 2 + 1)), "corpus"),
    (lambda: step_through(" \n\t "), "corpus"),
    (lambda: step_through("col·legi"), "corpus"),
    (lambda: step_through(steps=MAX_STEPS + 1), "steps"),
    (lambda: step_through(steps=-1), "steps"),
    (lambda: step_through(start=MAX_STEPS + 1), "start"),
    (lambda: step_through(tie_break="alphabetical"), "tie_break"),
    (lambda: step_through(min_count=0), "min_count"),
])
def test_bounds_are_refused_naming_the_field(call, field):
    with pytest.raises(InvalidInput) as refused:
        call()
    assert refused.value.field == field


def test_without_the_marker_the_middle_dot_is_a_letter():
    words = corpus_words("col·legi col·legi", end_of_word=False)
    assert words[0].tokens == tuple("col·legi") and words[0].count == 2
    assert step_through("a" * MAX_CHARACTERS, 1).merges[0].token == "aa"  # exactly at the bound: accepted
