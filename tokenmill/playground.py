"""Encoding one text for people: ids, token strings, offsets (the dashboard's playground)."""

import uuid
from collections import OrderedDict
from typing import Any

from tokenizers import Tokenizer

from tokenmill.encoders import reference_encoder
from tokenmill.errors import InvalidInput
from tokenmill.models import TokenizerVersion
from tokenmill.references import REFERENCE_NAMES
from tokenmill.store import ObjectStore
from tokenmill.versions import version_file

MAX_TEXT = 100_000


_CACHE: OrderedDict[uuid.UUID, Tokenizer] = OrderedDict()
_CACHE_SIZE = 32


def _tokenizer(store: ObjectStore, version: TokenizerVersion) -> Tokenizer:
    # Versions are immutable, so a loaded tokenizer stays right; keep the most recent few.
    if version.id in _CACHE:
        _CACHE.move_to_end(version.id)
        return _CACHE[version.id]
    tokenizer = Tokenizer.from_str(store.get_bytes(version_file(version, "tokenizer.json")["key"]).decode())
    tokenizer.encode_special_tokens = True
    _CACHE[version.id] = tokenizer
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return tokenizer


def _check(text: Any) -> str:
    if not isinstance(text, str):
        raise InvalidInput("'text' must be a string", field="text")
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"'text' is longer than {MAX_TEXT} characters", field="text")
    return text


def _summary(text: str, ids: list[int], tokens: list[str], offsets: list[tuple[int, int]]) -> dict[str, Any]:
    return {"ids": ids, "tokens": tokens, "offsets": [list(o) for o in offsets],
            "pieces": [text[start:end] for start, end in offsets], "count": len(ids),
            "chars_per_token": len(text) / len(ids) if ids else 0.0}


def encode_with_version(store: ObjectStore, version: TokenizerVersion, text: Any) -> dict[str, Any]:
    """How a version tokenizes a text (no special tokens added)."""
    text = _check(text)
    encoding = _tokenizer(store, version).encode(text, add_special_tokens=False)
    return {"tokenizer": f"{version.name} v{version.version}", **_summary(text, encoding.ids, encoding.tokens, encoding.offsets)}


def encode_with_reference(name: str, text: Any) -> dict[str, Any]:
    """How GPT-2, cl100k_base or o200k_base tokenizes a text."""
    text = _check(text)
    if name not in REFERENCE_NAMES:
        raise InvalidInput(f"unknown reference {name!r}: use one of {', '.join(REFERENCE_NAMES)}", field="reference")
    encoder = reference_encoder(name)
    ids, offsets = encoder.encode_batch([text]).line(0)
    tokens = [encoder.enc.decode_single_token_bytes(i).decode("utf-8", "replace") for i in ids]
    return {"tokenizer": name, **_summary(text, ids, tokens, offsets)}
