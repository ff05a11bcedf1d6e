"""Encoders for evaluation: one interface over `tokenizers` and tiktoken.

An encoder turns a batch of lines into token ids and each token's character span, never
adding special tokens and treating special-token strings inside text as plain text (the
same policy on both engines: `encode_special_tokens=True` / `encode_ordinary`). Byte-level
BPE versions with a rank file are encoded by tiktoken, several times faster, once its ids
are shown equal to the `tokenizers` ids on the text at hand (see `proven_encoder`).
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import tiktoken
from tokenizers import Tokenizer

from tokenmill.references import load_reference
from tokenmill.tiktoken_format import encoding as tiktoken_encoding, parse_rank_file

Spans = list[tuple[int, int]]


@dataclass
class Encoder:
    """What the metrics need to know about a tokenizer, and how to run it."""

    name: str
    engine: str
    vocab_size: int
    unk_id: int | None = None
    byte_fallback_ids: frozenset[int] = field(default_factory=frozenset)

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        raise NotImplementedError

    def encode_with_spans(self, lines: Sequence[str]) -> list[tuple[list[int], Spans]]:
        raise NotImplementedError

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        raise NotImplementedError


class TokenizersEncoder(Encoder):
    """A `tokenizers.Tokenizer`, batch-encoded on all cores."""

    def __init__(self, name: str, tokenizer: Tokenizer) -> None:
        tokenizer.encode_special_tokens = True
        model = json.loads(tokenizer.to_str())["model"]
        unk = model.get("unk_token")
        unk_id = model.get("unk_id") if model.get("type") == "Unigram" else (tokenizer.token_to_id(unk) if unk else None)
        byte_ids = frozenset()
        if model.get("byte_fallback"):
            byte_ids = frozenset(i for v in range(256) if (i := tokenizer.token_to_id(f"<0x{v:02X}>")) is not None)
        super().__init__(name, "tokenizers", tokenizer.get_vocab_size(with_added_tokens=True), unk_id, byte_ids)
        self.tokenizer = tokenizer

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self.tokenizer.encode_batch(list(lines), add_special_tokens=False)]

    def encode_with_spans(self, lines: Sequence[str]) -> list[tuple[list[int], Spans]]:
        return [(e.ids, e.offsets) for e in self.tokenizer.encode_batch(list(lines), add_special_tokens=False)]

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return self.tokenizer.decode_batch([list(ids) for ids in batch], skip_special_tokens=False)


class TiktokenEncoder(Encoder):
    """A tiktoken Encoding; spans come from each token's byte length."""

    def __init__(self, name: str, enc: tiktoken.Encoding, threads: int = 2) -> None:
        super().__init__(name, "tiktoken", enc.n_vocab)
        self.enc = enc
        self.threads = threads
        self.token_bytes = _token_lengths(enc)

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return self.enc.encode_ordinary_batch(list(lines), num_threads=self.threads)

    def encode_with_spans(self, lines: Sequence[str]) -> list[tuple[list[int], Spans]]:
        return [(ids, self._spans(line, ids)) for line, ids in zip(lines, self.encode(lines))]

    def _spans(self, line: str, ids: list[int]) -> Spans:
        # Each token's bytes [start, end) mapped to the characters that hold them: like
        # `tokenizers`' offsets, the pieces of a split character all get that character.
        ends = np.cumsum(self.token_bytes[np.asarray(ids, dtype=np.int64)]) if ids else np.zeros(0, np.int64)
        starts = ends - self.token_bytes[np.asarray(ids, dtype=np.int64)] if ids else ends
        if line.isascii():
            return list(zip(starts.tolist(), ends.tolist()))
        char_ends = np.cumsum(np.fromiter((len(c.encode()) for c in line), dtype=np.int64, count=len(line)))
        first = np.searchsorted(char_ends, starts, side="right")
        last = np.searchsorted(char_ends, ends - 1, side="right") + 1
        return list(zip(first.tolist(), last.tolist()))

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return self.enc.decode_batch([list(ids) for ids in batch], errors="replace", num_threads=self.threads)


def _token_lengths(enc: tiktoken.Encoding) -> np.ndarray:
    lengths = np.zeros(enc.max_token_value + 1, dtype=np.int64)
    for rank in range(enc.max_token_value + 1):
        try:
            lengths[rank] = len(enc.decode_single_token_bytes(rank))
        except KeyError:
            pass  # an unused id between the ranks and the special tokens
    return lengths


@lru_cache(maxsize=None)
def reference_encoder(name: str) -> TiktokenEncoder:
    """GPT-2, cl100k_base or o200k_base, from their verified rank files."""
    return TiktokenEncoder(name, load_reference(name))


def version_encoders(name: str, files: dict[str, bytes], manifest: dict) -> tuple[TokenizersEncoder, TiktokenEncoder | None]:
    """The `tokenizers` encoder of a version and, when it has a rank file, the tiktoken one."""
    slow = TokenizersEncoder(name, Tokenizer.from_str(files["tokenizer.json"].decode()))
    info = manifest.get("tiktoken") or {}
    if not info.get("file") or info["file"] not in files:
        return slow, None
    ranks = parse_rank_file(files[info["file"]])
    fast = TiktokenEncoder(name, tiktoken_encoding(name, ranks, info["special_tokens"], info["pat_str"]))
    return slow, fast


def proven_encoder(slow: TokenizersEncoder, fast: TiktokenEncoder | None, sample: Sequence[str]) -> Encoder:
    """The fast encoder if its ids equal the slow one's on every sample line, else the slow one."""
    if fast is None:
        return slow
    return fast if fast.encode(sample) == slow.encode(sample) else slow
