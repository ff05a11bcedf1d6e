"""A stored BPE version's first merges, replayed on a sample of a corpus, one step at a time.

The sample (a corpus's first lines, at most MAX_CHARACTERS) is normalized and pre-tokenized
by the version's own tokenizer.json, so its words look as the version saw its training text
("Ġthe" for byte-level BPE, "▁the" for metaspace); each word starts as its characters (with
the model's continuing-subword prefix and end-of-word suffix, as its trainer starts them).
Then the version's merges are applied in their order, each state showing the sample's pair
counts (tokenmill.playground.bpe_steps) beside the merge the version actually made next: a person sees
where the sample agrees with the training corpus and where it does not.

A version's pre-tokenization regex can backtrack for minutes on some text, inside Rust code
that cannot be interrupted (see tokenmill.sandboxed.sandbox), and the replay itself is pure
Python: `replayed` runs in a sandbox process, bounded in time and memory, on the team's share
(tokenmill.playground.bpe_runs); this process only reads the store (`version_sample`).

Deliberately not handled: models other than BPE (Unigram and WordPiece learn no merge list:
refused), and sentencepiece's BPE, whose tokenizer.json merges are rebuilt from piece
scores (tokenmill.training.with_sentencepiece.bpe_merges): they replay, but are not the order
sentencepiece's trainer chose them in.
"""

import itertools
import json
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer

from tokenmill.corpora.reading import corpus_documents
from tokenmill.errors import InvalidInput
from tokenmill.models import Corpus, TokenizerVersion
from tokenmill.playground.bpe_steps import (
    MAX_CHARACTERS,
    Merge,
    Pair,
    PairIndex,
    Run,
    Word,
    check_steps,
    states,
    vocabulary,
)
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import version_file

SAMPLE_LINES = 50
MAX_SAMPLE_LINES = 1000


@dataclass(frozen=True)
class Sample:
    """The first lines of a corpus, cut to MAX_CHARACTERS (`truncated` when the cut fell short of `lines`)."""

    texts: list[str]
    characters: int
    truncated: bool


def parse_merges(tokenizer_json: bytes | None = None, merges_txt: bytes | None = None) -> list[Pair]:
    """A BPE version's ordered merges, from its tokenizer.json (either merge format) or its merges.txt."""
    if tokenizer_json is not None:
        return model_merges(json.loads(tokenizer_json)["model"])
    if merges_txt is not None:
        lines = merges_txt.decode("utf-8").splitlines()
        return [_split_merge(line) for line in lines if line and not line.startswith("#version")]
    raise ValueError("give tokenizer.json or merges.txt")


def model_merges(model: dict[str, Any]) -> list[Pair]:
    """The merges of a tokenizer.json "model" (InvalidInput for a model that has none)."""
    if model.get("type") != "BPE":
        raise InvalidInput(f"the version's model is {model.get('type')}, which learns no merges: pick a BPE version",
                           field="tokenizer")
    # tokenizers writes [left, right] since 0.20; older files wrote "left right".
    return [(m[0], m[1]) if isinstance(m, list) else _split_merge(m) for m in model["merges"]]


def _split_merge(line: str) -> Pair:
    left, _, right = line.partition(" ")
    return left, right


def sample_words(pieces: Iterable[str], prefix: str | None = None, suffix: str | None = None) -> list[Word]:
    """Pre-tokenized pieces as a BPE model starts them: characters, the continuing-subword prefix on
    all but the first, the end-of-word suffix on the last (the trainer's `tokenize_words`)."""
    words = []
    for piece, count in Counter(p for p in pieces if p).items():
        chars = list(piece)
        if prefix:
            chars[1:] = [prefix + c for c in chars[1:]]
        if suffix:
            chars[-1] += suffix
        words.append(Word(tuple(chars), count))
    return words


def sample_counts(words: Sequence[Word], merges: Sequence[Pair]) -> list[int]:
    """Each merge's pair count on the words just before it is applied (after the merges before it)."""
    index = PairIndex(words)
    out = []
    for pair in merges:
        out.append(index.counts.get(pair, 0))
        index.apply(pair)
    return out


def replay(words: Sequence[Word], merges: Sequence[Pair], steps: int, start: int = 0,
           count: int | None = None) -> Run:
    """A version's first `steps` merges applied in order to sample words, each beside the sample's counts.

    The sample's pairs rank by count, ties first seen, so a person sees whether the sample
    alone would have chosen what the version did; a merge's count is 0 when the sample never
    has the pair (the version learned it from other text).
    """
    check_steps(steps, start)
    chosen = merges[:steps]
    made = [Merge(pair, pair[0] + pair[1], seen) for pair, seen in zip(chosen, sample_counts(words, chosen))]
    window, next_start = states(words, made, start, steps, "first_seen", count)
    return Run(tuple(made), vocabulary(words, made), tuple(window), len(made) < steps, next_start)


def read_sample(documents: Iterator[str], lines: int) -> Sample:
    """The first `lines` documents, stopping before MAX_CHARACTERS (a first line longer than that
    is cut at its last space before the limit, so no word is cut in two)."""
    texts: list[str] = []
    total = 0
    for text in itertools.islice(documents, lines):
        if total + len(text) > MAX_CHARACTERS:
            if not texts:
                head = text[:MAX_CHARACTERS]
                texts.append(head[:head.rfind(" ")] if " " in head else head)
                total = len(texts[0])
            return Sample(texts, total, True)
        texts.append(text)
        total += len(text)
    return Sample(texts, total, False)


def pre_tokenize(tokenizer_json: str, texts: list[str]) -> list[str]:
    """The texts as the version's normalizer and pre-tokenizer cut them (in a sandbox process: its
    regex may backtrack for as long as the process is let run)."""
    tokenizer = Tokenizer.from_str(tokenizer_json)
    if tokenizer.normalizer is not None:
        texts = [tokenizer.normalizer.normalize_str(text) for text in texts]
    if tokenizer.pre_tokenizer is None:
        return texts  # the model sees each line whole
    return [piece for text in texts for piece, _ in tokenizer.pre_tokenizer.pre_tokenize_str(text)]


def replayed(tokenizer_json: str, texts: list[str], steps: int, start: int = 0, count: int | None = None) -> Run:
    """The version's first `steps` merges replayed on the texts, cut as the version cuts them.
    Called in a sandbox process (tokenmill.playground.bpe_runs)."""
    model = json.loads(tokenizer_json)["model"]
    merges = model_merges(model)
    words = sample_words(pre_tokenize(tokenizer_json, texts), model.get("continuing_subword_prefix"),
                         model.get("end_of_word_suffix"))
    if not words:
        raise InvalidInput("the corpus sample has no words", field="corpus_id")
    return replay(words, merges, steps, start, count)


def version_sample(store: ObjectStore, version: TokenizerVersion, corpus: Corpus,
                   lines: int = SAMPLE_LINES) -> tuple[str, Sample]:
    """The version's tokenizer.json and the first `lines` lines of the corpus: what a replay runs on."""
    if not 1 <= lines <= MAX_SAMPLE_LINES:
        raise InvalidInput(f"'lines' must be between 1 and {MAX_SAMPLE_LINES}", field="lines")
    raw = store.get_bytes(version_file(version, "tokenizer.json")["key"]).decode("utf-8")
    model_merges(json.loads(raw)["model"])  # a model without merges is refused before any sampling
    return raw, read_sample(corpus_documents(store, corpus), lines)

