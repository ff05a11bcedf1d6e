"""Encoding one text for people: ids, token strings, offsets (the dashboard's playground)."""

from typing import Any

from tokenmill.encoders import reference_encoder
from tokenmill.errors import InvalidInput
from tokenmill.models import TokenizerVersion
from tokenmill.references import REFERENCE_NAMES
from tokenmill.store import ObjectStore
from tokenmill.versions import load_tokenizer

MAX_TEXT = 100_000


def _check(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"'text' is longer than {MAX_TEXT} characters", field="text")
    return text


def _summary(text: str, ids: list[int], tokens: list[str], offsets: list[tuple[int, int]]) -> dict[str, Any]:
    return {"ids": ids, "tokens": tokens, "offsets": [list(o) for o in offsets],
            "pieces": [text[start:end] for start, end in offsets], "count": len(ids),
            "chars_per_token": len(text) / len(ids) if ids else 0.0}


def encode_with_version(store: ObjectStore, version: TokenizerVersion, text: str) -> dict[str, Any]:
    """How a version tokenizes a text (no special tokens added)."""
    text = _check(text)
    encoding = load_tokenizer(store, version).encode(text, add_special_tokens=False)
    return {"tokenizer": f"{version.name} v{version.version}", **_summary(text, encoding.ids, encoding.tokens, encoding.offsets)}


def encode_with_reference(name: str, text: str) -> dict[str, Any]:
    """How GPT-2, cl100k_base or o200k_base tokenizes a text."""
    text = _check(text)
    if name not in REFERENCE_NAMES:
        raise InvalidInput(f"unknown reference {name!r}: use one of {', '.join(REFERENCE_NAMES)}", field="reference")
    encoder = reference_encoder(name)
    ids, offsets = encoder.encode_batch([text]).line(0)
    tokens = [encoder.enc.decode_single_token_bytes(i).decode("utf-8", "replace") for i in ids]
    return {"tokenizer": name, **_summary(text, ids, tokens, offsets)}
