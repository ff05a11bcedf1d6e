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

import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from tokenizers import Tokenizer

from tokenmill.models import TokenizerVersion
from tokenmill.store import ObjectStore
from tokenmill.versions import version_file


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


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, as byte-level BPE writes tokens; inverted."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    # Bytes without a printable character of their own are moved to 256, 257, … in order.
    moved = [b for b in range(256) if b not in kept]
    table = {chr(b): b for b in kept}
    table.update({chr(256 + i): b for i, b in enumerate(moved)})
    return table


_BYTES = _byte_alphabet()


def readable_token(token: str, byte_level: bool) -> str:
    """A token as the text it stands for: byte-level tokens decoded ('Ġthe' → ' the'; a split character → '�')."""
    if not byte_level or any(ch not in _BYTES for ch in token):
        return token
    return bytes(_BYTES[ch] for ch in token).decode("utf-8", errors="replace")


_CACHE: OrderedDict[uuid.UUID, dict[str, int]] = OrderedDict()
_CACHE_SIZE = 8


def load_vocabulary(store: ObjectStore, version: TokenizerVersion) -> dict[str, int]:
    """The token → id map of a version, from its tokenizer.json (versions are immutable: cached)."""
    if version.id in _CACHE:
        _CACHE.move_to_end(version.id)
        return _CACHE[version.id]
    data = store.get_bytes(version_file(version, "tokenizer.json")["key"]).decode()
    vocabulary = Tokenizer.from_str(data).get_vocab(with_added_tokens=True)
    _CACHE[version.id] = vocabulary
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return vocabulary
