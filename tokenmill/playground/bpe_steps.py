"""BPE one merge at a time, for people to watch: every step's state on a small corpus (seed article 004).

The corpus is split on whitespace into words; each distinct word starts as its characters,
plus an end-of-word marker as a symbol of its own when asked (the article's "·", its code's
"</w>"). Each step counts every adjacent pair of symbols, weighted by how often its word
occurs, merges the winning pair everywhere (left to right, non-overlapping, as the article's
`merge` does), and adds the new symbol to the vocabulary. Learning stops after `steps`
merges or when no pair occurs `min_count` times (the article's loop stops below 2).

Two ways to break a tie between equally frequent pairs (TIE_BREAKS):

- "first_seen", the article's "first pair seen": among the pairs with the highest count, the
  one whose first occurrence comes first when the corpus is read word by word (in order of
  each word's first appearance), left to right. That is what the article's
  `pairs.most_common(1)` returns: a Counter keeps the order in which pairs were first
  counted, and `most_common(1)` is `max`, which keeps the first of equal counts.
- "tokenizers", Hugging Face tokenizers' BpeTrainer (tokenizers/src/models/bpe/trainer.rs,
  `impl Ord for Merge`): the higher count, then the smaller pair of ids, compared as a tuple
  (left id first). Ids are those the trainer hands out: the alphabet sorted by code point
  (`compute_alphabet`: "sorted for determinism"), then each merged token in the order it was
  made (a merge whose string already exists reuses that id). Not a comparison of strings:
  "er", made by the first merge, has a larger id than "l".

`learn` finds the merges (pair counts kept up to date word by word, so 500 merges of a
10,000-character corpus take well under a second); `states` then rebuilds the full state of
a window of steps (every pair counted afresh and ranked by the rule, the words as tokens),
up to MAX_ENTRIES words and pairs, so no answer grows past a couple of megabytes.
tokenmill.playground.bpe_replay uses the same states for a stored version's own merges on a sample.

Deliberately not handled: bytes (byte-level BPE), normalization, pre-tokenization other
than whitespace, and `max_token_length`.
"""

import heapq
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tokenmill.errors import InvalidInput

Pair = tuple[str, str]

DEFAULT_CORPUS = ("low low low low low lowest lowest newer newer newer newer newer newer wider wider wider "
                  "new new")
END_OF_WORD = "·"  # the article's marker, one character (U+00B7), numbered by code point like any other
MAX_CHARACTERS = 10_000
MAX_STEPS = 500
MIN_COUNT = 2  # the article stops when no pair occurs twice: a pair seen once teaches nothing
# Words and pairs, summed over the states of one answer: about 2 MB of JSON.
MAX_ENTRIES = 50_000
MAX_TIED = 10  # tied pairs listed with a merge (all are counted)

TIE_BREAKS = {
    "first_seen": "First pair seen (seed article): of the pairs with the highest count, the one that occurs first "
                  "when the corpus is read word by word, left to right",
    "tokenizers": "Hugging Face tokenizers (BpeTrainer): of the pairs with the highest count, the one with the "
                  "smallest pair of ids: characters numbered by code point, then merged tokens in the order made",
}


@dataclass(frozen=True)
class Word:
    """A distinct word of the corpus as its current tokens, and how often it occurs."""

    tokens: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class Merge:
    """One merge: the pair, the token it makes and its count; `ties` equally frequent pairs lost to
    it, the first MAX_TIED of them in `tied` (in the rule's order). In a replay, `count` is the
    pair's count on the sample."""

    pair: Pair
    token: str
    count: int
    tied: tuple[Pair, ...] = ()
    ties: int = 0


@dataclass(frozen=True)
class State:
    """The corpus after `step` merges and what decides the next one.

    `pairs` holds every adjacent pair with its count, in the rule's order: in training the
    first is `next`; in a replay `next` is the version's merge, wherever the sample ranks it.
    The vocabulary at this state is the run's first `vocabulary_size` entries, the merges so
    far its first `step` merges.
    """

    step: int
    words: tuple[Word, ...]
    pairs: tuple[tuple[Pair, int], ...]
    next: Merge | None
    vocabulary_size: int

    @property
    def next_rank(self) -> int | None:
        """Where the next merge's pair ranks among `pairs` (1: first), None if absent (a replay
        whose sample lacks it) or when there is no next merge."""
        if self.next is None:
            return None
        return next((i for i, (pair, _) in enumerate(self.pairs, start=1) if pair == self.next.pair), None)


@dataclass(frozen=True)
class Run:
    """Every merge made (in order), the final vocabulary, and the states of the window asked for.

    `done`: the merges ran out before `steps` (no pair reached `min_count`, or the version has
    no more). `next_start`: where the next window starts, when MAX_ENTRIES cut this one short.
    """

    merges: tuple[Merge, ...]
    vocabulary: tuple[str, ...]
    states: tuple[State, ...]
    done: bool
    next_start: int | None


# ---- checks ---------------------------------------------------------------------------------

def check_corpus(text: str, field: str = "corpus") -> None:
    """Refuse a corpus too long to step through, or one without words."""
    if len(text) > MAX_CHARACTERS:
        raise InvalidInput(f"'{field}' has {len(text):,} characters; the step-through takes at most "
                           f"{MAX_CHARACTERS:,}", field=field)
    if not text.split():
        raise InvalidInput(f"'{field}' has no words: type a few, separated by spaces", field=field)


def check_steps(steps: int, start: int = 0) -> None:
    if not 0 <= steps <= MAX_STEPS:
        raise InvalidInput(f"'steps' must be between 0 and {MAX_STEPS}", field="steps")
    if not 0 <= start <= MAX_STEPS:
        raise InvalidInput(f"'start' must be between 0 and {MAX_STEPS}", field="start")


def check_rule(tie_break: str, min_count: int) -> None:
    if tie_break not in TIE_BREAKS:
        raise InvalidInput(f"'tie_break' must be one of: {', '.join(TIE_BREAKS)}", field="tie_break")
    if min_count < 1:
        raise InvalidInput("'min_count' must be at least 1", field="min_count")


# ---- words and pairs ------------------------------------------------------------------------

def corpus_words(text: str, end_of_word: bool = True) -> list[Word]:
    """The distinct whitespace words in order of first appearance, as characters (+ marker), with counts."""
    if end_of_word and END_OF_WORD in text:
        # The marker would be indistinguishable from the same character inside a word.
        raise InvalidInput(f"'corpus' contains {END_OF_WORD!r}, the end-of-word marker: remove it, or turn the "
                           "marker off (end_of_word: false)", field="corpus")
    marker = (END_OF_WORD,) if end_of_word else ()
    return [Word((*word, *marker), count) for word, count in Counter(text.split()).items()]


def count_pairs(words: Iterable[Word]) -> dict[Pair, int]:
    """Every adjacent pair's count, weighted by word counts, in the order pairs are first seen."""
    counts: dict[Pair, int] = {}
    for word in words:
        for pair in zip(word.tokens, word.tokens[1:]):
            counts[pair] = counts.get(pair, 0) + word.count
    return counts


def merge_tokens(tokens: Sequence[str], pair: Pair) -> tuple[str, ...]:
    """The tokens with every occurrence of the pair joined, left to right (so "a a a" gives "aa a")."""
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if i + 1 < len(tokens) and tokens[i] == pair[0] and tokens[i + 1] == pair[1]:
            out.append(tokens[i] + tokens[i + 1])
            i += 2
        else:
            out.append(tokens[i])
            i += 1
    return tuple(out)


def merge_words(words: Sequence[Word], pair: Pair) -> tuple[Word, ...]:
    return tuple(Word(merge_tokens(w.tokens, pair), w.count) if pair[0] in w.tokens else w for w in words)


def alphabet(words: Iterable[Word]) -> list[str]:
    """The initial symbols by code point: the order in which tokenizers' trainer numbers them."""
    return sorted({token for word in words for token in word.tokens})


def ranked(counts: dict[Pair, int], tie_break: str, ids: dict[str, int]) -> list[tuple[Pair, int]]:
    """The pairs in the order the rule picks them: highest count first, ties as the rule says."""
    if tie_break == "tokenizers":
        return sorted(counts.items(), key=lambda item: (-item[1], ids[item[0][0]], ids[item[0][1]]))
    # sorted() is stable: equal counts keep the order in which count_pairs first saw them.
    return sorted(counts.items(), key=lambda item: -item[1])


# ---- learning -------------------------------------------------------------------------------

class PairIndex:
    """The words' tokens with every pair's count kept up to date as merges are applied.

    Each pair knows the words it occurs in, so a merge visits only those, and pairs are
    bucketed by count, so the most frequent ones are found without scanning them all.
    """

    def __init__(self, words: Sequence[Word]) -> None:
        self.words = words
        self.tokens = [list(word.tokens) for word in words]
        self.counts: dict[Pair, int] = {}
        self.where: dict[Pair, set[int]] = {}
        self.by_count: dict[int, set[Pair]] = {}
        for index, word in enumerate(words):
            self._add(index, word.count)

    def top(self) -> tuple[int, set[Pair]]:
        """The highest count and the pairs that have it (0 and nothing when no pair is left)."""
        if not self.by_count:
            return 0, set()
        best = max(self.by_count)
        return best, self.by_count[best]

    def apply(self, pair: Pair) -> None:
        """Merge the pair in every word that has it."""
        for index in sorted(self.where.pop(pair, ())):
            self._add(index, -self.words[index].count)
            self.tokens[index] = list(merge_tokens(self.tokens[index], pair))
            self._add(index, self.words[index].count)

    def first_seen(self, pairs: set[Pair], limit: int) -> list[Pair]:
        """Up to `limit` of the pairs in corpus order: word by word, left to right."""
        wanted, order = set(pairs), []
        for word in self.tokens:
            for pair in itertools.pairwise(word):
                if pair in wanted:
                    wanted.discard(pair)
                    order.append(pair)
                    if len(order) == limit or not wanted:
                        return order
        return order

    def _add(self, index: int, count: int) -> None:
        # Add one word's pairs (or take them away, with a negative count), moving each between buckets.
        for pair in zip(self.tokens[index], self.tokens[index][1:]):
            old = self.counts.get(pair, 0)
            new = old + count
            if old:
                self._unbucket(pair, old)
            if new > 0:
                self.counts[pair] = new
                self.by_count.setdefault(new, set()).add(pair)
                if count > 0:
                    self.where.setdefault(pair, set()).add(index)
            else:
                self.counts.pop(pair, None)
                self.where.pop(pair, None)

    def _unbucket(self, pair: Pair, count: int) -> None:
        bucket = self.by_count[count]
        bucket.discard(pair)
        if not bucket:
            del self.by_count[count]


def learn(words: Sequence[Word], steps: int, tie_break: str = "first_seen", min_count: int = MIN_COUNT) -> list[Merge]:
    """The merges BPE learns on the words, at most `steps`, ties broken by the rule."""
    index = PairIndex(words)
    ids = {token: i for i, token in enumerate(alphabet(words))}
    merges: list[Merge] = []
    while len(merges) < steps:
        best, tied = index.top()
        if best < min_count:
            break
        if tie_break == "tokenizers":
            order = heapq.nsmallest(MAX_TIED + 1, tied, key=lambda pair: (ids[pair[0]], ids[pair[1]]))
        else:
            order = index.first_seen(tied, MAX_TIED + 1)
        pair = order[0]
        merges.append(Merge(pair, pair[0] + pair[1], best, tuple(order[1:]), len(tied) - 1))
        # A merge making a string that already exists keeps its id, as the trainer does.
        ids.setdefault(pair[0] + pair[1], len(ids))
        index.apply(pair)
    return merges


# ---- states ---------------------------------------------------------------------------------

def states(words: Sequence[Word], merges: Sequence[Merge], start: int, end: int, tie_break: str,
           count: int | None = None) -> tuple[list[State], int | None]:
    """The states `start`..`end`, clamped to the merges there are (a start past the last state gives
    the last), at most `count` of them and about MAX_ENTRIES words and pairs; and where the next
    window starts (None when this one reached the end)."""
    ids = {token: i for i, token in enumerate(alphabet(words))}
    last = min(end, len(merges))
    start = min(start, last)
    stop = last if count is None else min(last, start + count - 1)
    # Fast-forward to the window through the index: it visits only the words each merge changes.
    index = PairIndex(words)
    for earlier in merges[:start]:
        ids.setdefault(earlier.token, len(ids))
        index.apply(earlier.pair)
    current = tuple(Word(tuple(tokens), word.count) for tokens, word in zip(index.tokens, words))
    out: list[State] = []
    entries = 0
    for step in range(start, stop + 1):
        counts = count_pairs(current)
        if out and entries + len(current) + len(counts) > MAX_ENTRIES:
            return out, step
        merge = merges[step] if step < len(merges) else None
        out.append(State(step, current, tuple(ranked(counts, tie_break, ids)), merge, len(ids)))
        entries += len(current) + len(counts)
        if merge is not None:
            ids.setdefault(merge.token, len(ids))
            current = merge_words(current, merge.pair)
    return out, (stop + 1 if stop < last else None)


def step_through(text: str = DEFAULT_CORPUS, steps: int = MAX_STEPS, tie_break: str = "first_seen",
                 end_of_word: bool = True, min_count: int = MIN_COUNT, start: int = 0,
                 count: int | None = None) -> Run:
    """BPE on a small corpus: its merges, and the states from `start` (at most `count` of them):
    the one before each merge and the one after the last."""
    check_corpus(text)
    check_steps(steps, start)
    check_rule(tie_break, min_count)
    words = corpus_words(text, end_of_word)
    merges = learn(words, steps, tie_break, min_count)
    window, next_start = states(words, merges, start, steps, tie_break, count)
    return Run(tuple(merges), vocabulary(words, merges), tuple(window), len(merges) < steps, next_start)


def vocabulary(words: Sequence[Word], merges: Sequence[Merge]) -> tuple[str, ...]:
    """The alphabet by code point, then each merge's new token (an existing string is not added twice)."""
    return tuple(dict.fromkeys([*alphabet(words), *(merge.token for merge in merges)]))
