"""Notes for the pages where a split regex cuts a language's words below what merges can mend.

`tokenmill.playground.split_floor` measures a preset pattern on a corpus's first lines; this
module picks one corpus per language, asks for the patterns of the tokenizers a page shows, and
words what it found for people (one note per pattern and language, naming every tokenizer that
splits with it).
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tokenmill.models import Corpus, TokenizerVersion
from tokenmill.playground.split_floor import REFERENCE_PATTERNS, corpus_cuts, is_notable
from tokenmill.store import ObjectStore


@dataclass(frozen=True)
class FloorNote:
    pattern: str
    language: str
    subjects: list[str]
    cuts: dict[str, Any]

    @property
    def example(self) -> str:
        example = self.cuts.get("example")
        return "" if not example else f"{example['word']} → {'·'.join(example['pieces'])}"


def version_pattern(row: TokenizerVersion) -> str | None:
    """The preset split a version's spec names (gpt2, cl100k, o200k), or None (custom regex, or none)."""
    if row.spec.get("pre_tokenizer_regex"):
        return None
    return row.spec.get("pre_tokenizer")


def one_per_language(corpora: Iterable[Corpus], languages: Iterable[str] | None = None) -> list[Corpus]:
    """A corpus per language (the first given: a parallel one first), only of `languages` when named."""
    wanted = set(languages) if languages is not None else None
    chosen: dict[str, Corpus] = {}
    for corpus in sorted(corpora, key=lambda c: c.parallel_group is None):
        if (wanted is None or corpus.language in wanted) and corpus.language not in chosen:
            chosen[corpus.language] = corpus
    return [chosen[language] for language in sorted(chosen)]


def floor_notes(store: ObjectStore, corpora: Sequence[Corpus], subjects: Iterable[tuple[str, str | None]],
                references: Iterable[str] = tuple(REFERENCE_PATTERNS)) -> list[FloorNote]:
    """Notes where a pattern of the subjects ((label, pattern)) or of the references cuts a
    language's words inside, on one corpus of each language given."""
    users: dict[str, list[str]] = {}
    for label, pattern in [*subjects, *((name, REFERENCE_PATTERNS[name]) for name in references)]:
        if pattern:
            users.setdefault(pattern, []).append(label)
    notes = []
    for corpus in corpora:
        for pattern, cuts in corpus_cuts(store, corpus, users).items():
            if is_notable(cuts):
                notes.append(FloorNote(pattern, corpus.language, users[pattern], cuts))
    return notes
