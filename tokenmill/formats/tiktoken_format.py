"""tiktoken's `.tiktoken` rank format for byte-level BPE trained with `tokenizers`.

A `.tiktoken` file is one line per mergeable token: the token's raw bytes in base64, a
space, its rank (the id it encodes to). tiktoken merges the adjacent pair whose
concatenation has the lowest rank, while `tokenizers` applies the merge rule with the
lowest index. `BpeTrainer` gives merge i the next free id, so for pairs that are merge
rules the two orders agree, and `tiktoken_ranks` refuses a tokenizer where they do not.
tiktoken could still join a pair that is not a rule but concatenates to a vocabulary
token; training does not produce such cases in practice, and the unit tests compare the
ids of both libraries on real multilingual text and code.

Special-token strings inside text: `tokenizers` turns them into special ids even with
`add_special_tokens=False` (unless `encode_special_tokens` is set), tiktoken only when
they are allowed (`encode(text, allowed_special="all")`); pick the same policy on both sides.

Handled: a `tokenizer.json` whose model is BPE over the GPT-2 byte alphabet, with a
ByteLevel pre-tokenizer (alone, or after one isolated `Split` regex), no normalizer, and
special tokens anywhere in the id space (the trainer puts them at 0..k-1, which leaves a
gap below the byte tokens; tiktoken accepts that).

Deliberately not handled, refused with a ValueError: normalizers, a byte-level prefix
space, other pre-tokenizers (digit splitting, whitespace …), non-special added tokens,
BPE dropout, subword prefixes or suffixes and byte fallback. tiktoken cannot reproduce
any of them, so a rank file for such a tokenizer would encode differently. The split
regex itself is the caller's to pass to `encoding()`; this module does not check that
tiktoken's regex engine reads it the way Oniguruma does (see `patterns.PATTERNS`), only
that it never matches the empty string, on which tiktoken panics.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import regex
import tiktoken

__all__ = ["BYTE_DECODER", "encoding", "parse_rank_file", "rank_file", "tiktoken_ranks"]


def _byte_decoder() -> dict[str, int]:
    """Map each character of GPT-2's printable byte alphabet back to its byte."""
    # GPT-2 keeps printable Latin-1 bytes as themselves and shifts the other 68 bytes to
    # U+0100 and up, in byte order; `tokenizers`' ByteLevel uses the same table.
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), 256)]
    chars = {b: chr(b) for b in printable}
    shifted = (b for b in range(256) if b not in chars)
    chars.update({b: chr(256 + n) for n, b in enumerate(shifted)})
    return {char: byte for byte, char in chars.items()}


BYTE_DECODER = _byte_decoder()
BYTE_ENCODER = {byte: char for char, byte in BYTE_DECODER.items()}  # a byte as byte-level BPE writes it


def byte_level_token(token: bytes) -> str:
    """A token's bytes as byte-level BPE's tokenizer.json writes them (b" the" → "Ġthe")."""
    return "".join(BYTE_ENCODER[byte] for byte in token)

# A little of everything the split presets tell apart, to try a pattern on.
_PROBE = "Hello, World! I'm 12345 x\t\n\r\n  ñandú 你好 😀 --> end.  "


def _refuse(reason: str) -> ValueError:
    return ValueError(f"cannot export to tiktoken: {reason}")


def _check_pipeline(data: dict[str, Any]) -> None:
    """Refuse the parts of a tokenizer.json that tiktoken's regex + byte BPE cannot mimic."""
    if data.get("normalizer") is not None:
        kind = data["normalizer"].get("type")
        raise _refuse(f"the tokenizer has a normalizer ({kind}); tiktoken does not normalize")
    pre = data.get("pre_tokenizer")
    steps = pre.get("pretokenizers", []) if pre and pre.get("type") == "Sequence" else [pre] if pre else []
    if not steps or steps[-1].get("type") != "ByteLevel":
        raise _refuse("the pre-tokenizer does not end with ByteLevel, so the tokenizer is not byte-level")
    if steps[-1].get("add_prefix_space"):
        raise _refuse("ByteLevel adds a prefix space; tiktoken encodes text as it is")
    for step in steps[:-1]:
        if step.get("type") != "Split" or step.get("behavior") != "Isolated" or step.get("invert"):
            kind = step.get("type")
            raise _refuse(f"pre-tokenizer step {kind} is not an isolated Split; tiktoken has one regex")
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
    _check_merge_order(model)


def _check_merge_order(model: dict[str, Any]) -> None:
    """Refuse merges whose results are out of id order: tiktoken's only priority is the id."""
    vocab, previous = model.get("vocab", {}), -1
    for index, merge in enumerate(model.get("merges", [])):
        # Older tokenizer.json files write a merge as "left right"; byte-level tokens hold no space.
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        token_id = vocab.get(left + right)
        if token_id is None or token_id <= previous:
            rule = f"merge {index} ({left!r}, {right!r})"
            raise _refuse(f"{rule} does not give a higher id than the one before; tiktoken would reorder it")
        previous = token_id


def tiktoken_ranks(tokenizer_json: str) -> tuple[dict[bytes, int], dict[str, int]]:
    """Mergeable ranks (token bytes → id) and special tokens (string → id) of a byte-level BPE."""
    data = json.loads(tokenizer_json)
    _check_pipeline(data)
    special_tokens: dict[str, int] = {}
    for added in data.get("added_tokens", []):
        if not added.get("special"):
            token = added["content"]
            raise _refuse(f"added token {token!r} is not special; tiktoken only has special tokens")
        special_tokens[added["content"]] = added["id"]
    special_ids = set(special_tokens.values())

    ranks: dict[bytes, int] = {}
    for token, token_id in data["model"]["vocab"].items():
        # The trainer also lists special tokens in the model vocabulary; they are not
        # mergeable byte sequences (and "<|endoftext|>" would decode to plain bytes).
        if token_id in special_ids:
            continue
        try:
            ranks[bytes(BYTE_DECODER[char] for char in token)] = token_id
        except KeyError as exc:
            raise _refuse(f"token {token!r} has a character outside the byte-level alphabet") from exc
    # tiktoken starts every piece from single bytes and panics on a byte it has no rank for.
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise _refuse(f"{len(missing)} of the 256 single bytes are missing (train with initial_alphabet)")
    return ranks, special_tokens


def rank_file(ranks: dict[bytes, int]) -> bytes:
    """The `.tiktoken` text of ranks: base64 token, space, rank, one line each, by rank."""
    by_rank = sorted(ranks.items(), key=lambda item: item[1])
    return b"".join(base64.b64encode(token) + b" %d\n" % rank for token, rank in by_rank)


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


def encoding(
    name: str, ranks: dict[bytes, int], special_tokens: dict[str, int], pattern: str
) -> tiktoken.Encoding:
    """A tiktoken Encoding over these ranks, special tokens and split regex."""
    # tiktoken panics on an empty match (pyo3's PanicException is a BaseException, which
    # `except Exception` does not catch), so a pattern that yields one is refused here.
    try:
        empty = any(match.start() == match.end() for match in regex.finditer(pattern, _PROBE))
    except regex.error as exc:
        raise ValueError(f"split pattern {pattern!r} does not compile: {exc}") from exc
    if empty:
        raise ValueError(f"split pattern {pattern!r} can match the empty string; tiktoken would panic on it")
    return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=special_tokens)
