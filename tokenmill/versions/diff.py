"""Tokens added and removed between two versions' vocabularies (the version page's diff).

A vocabulary is read from the version's `tokenizer.json` (every model type the service
trains has one), special tokens included. Tokens are compared by their string as the
tokenizer stores it ("Ġthe" for byte-level BPE, "▁the" for metaspace); ids are kept only
to order the lists: for BPE a lower id is an earlier, more frequent merge. `readable_token`
turns a byte-level token back into the text it stands for, for people.

Deliberately not handled: matching tokens across different pre-tokenizers (a byte-level
"Ġthe" and a metaspace "▁the" count as different tokens), and score or merge-order
changes of tokens both vocabularies hold.
"""

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tokenmill.formats.tiktoken_format import BYTE_DECODER
from tokenmill.models import TokenizerVersion
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import load_tokenizer


@dataclass(frozen=True)
class VocabularyDiff:
    """What changed from an old vocabulary to a new one; lists hold (token, id) by id."""

    added: list[tuple[str, int]]
    removed: list[tuple[str, int]]
    kept: int


def vocabulary_diff(old: Mapping[str, int], new: Mapping[str, int]) -> VocabularyDiff:
    """Tokens only the new vocabulary has, tokens only the old one had, and how many both hold."""
    added = sorted(((token, i) for token, i in new.items() if token not in old), key=lambda pair: (pair[1], pair[0]))
    removed = sorted(((token, i) for token, i in old.items() if token not in new), key=lambda pair: (pair[1], pair[0]))
    return VocabularyDiff(added=added, removed=removed, kept=len(new) - len(added))


def readable_token(token: str, byte_level: bool) -> str:
    """A token as the text it stands for: byte-level tokens decoded ('Ġthe' → ' the'; a split character → '�')."""
    if not byte_level or any(ch not in BYTE_DECODER for ch in token):
        return token
    return bytes(BYTE_DECODER[ch] for ch in token).decode("utf-8", errors="replace")


def load_vocabulary(store: ObjectStore, version: TokenizerVersion) -> dict[str, int]:
    """The token → id map of a version, special tokens included."""
    return load_tokenizer(store, version).get_vocab(with_added_tokens=True)


_DIFFS: OrderedDict[tuple[str, uuid.UUID], VocabularyDiff] = OrderedDict()  # (old version id or reference, new version id)
_DIFFS_KEPT = 32
_DIFFS_LOCK = threading.Lock()


def versions_diff(store: ObjectStore, old: TokenizerVersion, new: TokenizerVersion) -> VocabularyDiff:
    """The diff of two versions' vocabularies (see `diff_from`)."""
    return diff_from(str(old.id), lambda: load_vocabulary(store, old), store, new)


def diff_from(old_key: str, old: Callable[[], Mapping[str, int]], store: ObjectStore,
              new: TokenizerVersion) -> VocabularyDiff:
    """The diff from a vocabulary (`old()`, named `old_key`: a version's id, or a reference an
    extension grew from) to a version's, kept for the next page view: versions never change,
    so a page reloaded in a loop costs two loads of tokenizer.json once, not on every view."""
    key = (old_key, new.id)
    with _DIFFS_LOCK:
        if key in _DIFFS:
            _DIFFS.move_to_end(key)
            return _DIFFS[key]
    diff = vocabulary_diff(old(), load_vocabulary(store, new))
    with _DIFFS_LOCK:
        _DIFFS[key] = diff
        while len(_DIFFS) > _DIFFS_KEPT:
            _DIFFS.popitem(last=False)
    return diff


@dataclass(frozen=True)
class Additions:
    """The tokens a version added to its base (ids from `first_id` on): how many, the first
    learned (the most frequent pairs of its training text) and the longest."""

    first_id: int
    count: int
    first: list[tuple[str, int]]
    longest: list[tuple[str, int]]


def additions(vocabulary: Mapping[str, int], first_id: int, shown: int = 20) -> Additions:
    """The tokens of a byte-level vocabulary from `first_id` on (one character a byte)."""
    new = sorted(((token, i) for token, i in vocabulary.items() if i >= first_id), key=lambda pair: pair[1])
    longest = sorted(new, key=lambda pair: (-len(pair[0]), pair[1]))[:shown]
    return Additions(first_id=first_id, count=len(new), first=new[:shown], longest=longest)
