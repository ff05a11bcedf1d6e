"""tiktoken's `.tiktoken` rank format for byte-level BPE trained with `tokenizers`.

A `.tiktoken` file is one line per mergeable token: the token's raw bytes in base64, a
space, its rank (the id it encodes to). tiktoken merges the adjacent pair whose
concatenation has the lowest rank, while `tokenizers` applies the merge rule with the
lowest index; for a vocabulary trained by `BpeTrainer`, where every merge creates the next
id, the two orders agree, and the unit tests check the ids on real text.

Handled: a `tokenizer.json` whose model is BPE over the GPT-2 byte alphabet, with a
ByteLevel pre-tokenizer (alone, or after one isolated `Split` regex), no normalizer, and
special tokens anywhere in the id space (the trainer puts them at 0..k-1, which leaves a
gap below the byte tokens; tiktoken accepts that).

Deliberately not handled, refused with a ValueError: normalizers, a byte-level prefix
space, other pre-tokenizers (digit splitting, whitespace …), non-special added tokens,
BPE dropout, subword prefixes or suffixes and byte fallback. tiktoken cannot reproduce
any of them, so a rank file for such a tokenizer would encode differently. The split
regex itself is the caller's to pass to `encoding()`; this module does not check that
tiktoken's regex engine reads it the way Oniguruma does (see `references.PATTERNS`).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import tiktoken

__all__ = ["encoding", "parse_rank_file", "rank_file", "tiktoken_ranks"]


def _byte_decoder() -> dict[str, int]:
    """Map each character of GPT-2's printable byte alphabet back to its byte."""
    # GPT-2 keeps printable Latin-1 bytes as themselves and shifts the other 68 bytes to
    # U+0100 and up, in byte order; `tokenizers`' ByteLevel uses the same table.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars.update({b: chr(256 + n) for n, b in enumerate(shifted)})
    return {char: byte for byte, char in chars.items()}


_BYTE_DECODER = _byte_decoder()


def _refuse(reason: str) -> ValueError:
    return ValueError(f"cannot export to tiktoken: {reason}")


def _check_pipeline(data: dict[str, Any]) -> None:
    """Refuse the parts of a tokenizer.json that tiktoken's regex + byte BPE cannot mimic."""
    if data.get("normalizer") is not None:
        raise _refuse(f"the tokenizer has a normalizer ({data['normalizer'].get('type')}); tiktoken does not normalize")
    pre = data.get("pre_tokenizer")
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre] if pre else []
    if not steps or steps[-1].get("type") != "ByteLevel":
        raise _refuse("the pre-tokenizer does not end with ByteLevel, so the tokenizer is not byte-level")
    if steps[-1].get("add_prefix_space"):
        raise _refuse("ByteLevel adds a prefix space; tiktoken encodes text as it is")
    for step in steps[:-1]:
        if step.get("type") != "Split" or step.get("behavior") != "Isolated" or step.get("invert"):
            raise _refuse(f"pre-tokenizer step {step.get('type')} is not an isolated Split; tiktoken has one regex")
        if "Regex" not in step.get("pattern", {}):
            raise _refuse("the Split pattern is a literal string, not a regex")
    if len(steps) > 2 or (len(steps) == 2 and steps[-1].get("use_regex")):
        raise _refuse("the tokenizer applies more than one split regex; tiktoken has one")
    model = data.get("model", {})
    if model.get("type") != "BPE":
        raise _refuse(f"the model is {model.get('type')}, not BPE")
    for option in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise _refuse(f"the BPE model sets {option}")
    if model.get("byte_fallback"):
        raise _refuse("the BPE model uses byte fallback, which is not byte-level BPE")


def tiktoken_ranks(tokenizer_json: str) -> tuple[dict[bytes, int], dict[str, int]]:
    """Mergeable ranks (token bytes → id) and special tokens (string → id) of a byte-level BPE."""
    data = json.loads(tokenizer_json)
    _check_pipeline(data)
    special_tokens: dict[str, int] = {}
    for added in data.get("added_tokens", []):
        if not added.get("special"):
            raise _refuse(f"added token {added['content']!r} is not special; tiktoken only has special tokens")
        special_tokens[added["content"]] = added["id"]
    special_ids = set(special_tokens.values())

    ranks: dict[bytes, int] = {}
    for token, token_id in data["model"]["vocab"].items():
        # The trainer also lists special tokens in the model vocabulary; they are not
        # mergeable byte sequences (and "<|endoftext|>" would decode to plain bytes).
        if token_id in special_ids:
            continue
        try:
            ranks[bytes(_BYTE_DECODER[char] for char in token)] = token_id
        except KeyError as exc:
            raise _refuse(f"token {token!r} has a character outside the byte-level alphabet") from exc
    # tiktoken starts every piece from single bytes and panics on a byte it has no rank for.
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise _refuse(f"{len(missing)} of the 256 single bytes are not in the vocabulary (train with initial_alphabet)")
    return ranks, special_tokens


def rank_file(ranks: dict[bytes, int]) -> bytes:
    """The `.tiktoken` text of ranks: base64 token, space, rank, one line each, by rank."""
    lines = (base64.b64encode(token) + b" %d\n" % rank for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]))
    return b"".join(lines)


def parse_rank_file(data: bytes) -> dict[bytes, int]:
    """Read a `.tiktoken` rank file into token bytes → rank."""
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError as exc:  # binascii.Error is a ValueError too
            raise ValueError(f"rank file line {number} is not 'base64token rank': {line[:80]!r}") from exc
    return ranks


def encoding(name: str, ranks: dict[bytes, int], special_tokens: dict[str, int], pattern: str) -> tiktoken.Encoding:
    """A tiktoken Encoding over these ranks, special tokens and split regex."""
    return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special_tokens)
