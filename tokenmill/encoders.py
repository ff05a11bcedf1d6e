"""Encoders for evaluation: one interface over `tokenizers` and tiktoken.

An encoder turns a batch of lines into token ids and each token's character span, never
adding special tokens and treating special-token strings inside text as plain text (the
same policy on both engines: `encode_special_tokens=True` / `encode_ordinary`). Byte-level
BPE versions with a rank file are encoded by tiktoken, several times faster, once its ids
are shown equal to the `tokenizers` ids on the text at hand (see `proven_encoder`).
"""

import itertools
import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sentencepiece
import tiktoken
from sentencepiece import sentencepiece_model_pb2 as model_pb2
from tokenizers import Tokenizer

from tokenmill.references import load_reference
from tokenmill.tiktoken_format import encoding as tiktoken_encoding, parse_rank_file

Spans = list[tuple[int, int]]


@dataclass
class EncodedBatch:
    """A batch of lines encoded: ids per line, and the same flat with (n, 2) character spans."""

    ids: list[list[int]]
    flat: np.ndarray
    spans: np.ndarray
    counts: np.ndarray

    def line(self, index: int) -> tuple[list[int], Spans]:
        """The ids and spans of one line of the batch."""
        start = int(self.counts[:index].sum())
        spans = self.spans[start:start + int(self.counts[index])]
        return self.ids[index], [tuple(pair) for pair in spans.tolist()]


@dataclass
class Encoder:
    """What the metrics need to know about a tokenizer, and how to run it."""

    name: str
    engine: str
    vocab_size: int
    unk_id: int | None = None
    byte_fallback_ids: frozenset[int] = field(default_factory=frozenset)
    # How another process builds the same encoder (tokenmill.shards), if it can.
    recipe: dict | None = None

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        raise NotImplementedError

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        raise NotImplementedError

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        raise NotImplementedError

    def roundtrips(self, lines: Sequence[str], encoded: "EncodedBatch") -> int:
        """How many lines decode back to themselves."""
        return sum(back == line for line, back in zip(lines, self.decode(encoded.ids)))


def _flat(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(counts.sum()))
    return flat, counts


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

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        encodings = self.tokenizer.encode_batch(list(lines), add_special_tokens=False)
        ids = [e.ids for e in encodings]
        flat, counts = _flat(ids)
        offsets = itertools.chain.from_iterable(itertools.chain.from_iterable(e.offsets for e in encodings))
        spans = np.fromiter(offsets, dtype=np.int64, count=2 * len(flat)).reshape(-1, 2)
        return EncodedBatch(ids, flat, spans, counts)

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return self.tokenizer.decode_batch([list(ids) for ids in batch], skip_special_tokens=False)


def byte_length_spans(lines: Sequence[str], lengths: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Character spans of tokens given each token's byte length, for engines that give no offsets.

    The tokens of a batch cover its lines' bytes end to end, so one cumulative sum gives every
    token's byte range in the concatenated text; each range is then mapped to the characters
    holding it (the pieces of a split character all get that character, as in `tokenizers`).
    """
    if not len(lengths):
        return np.zeros((0, 2), np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    points = np.frombuffer("".join(lines).encode("utf-32-le"), dtype=np.uint32)
    if len(points) and int(points.max()) < 0x80:
        first, last = starts, ends  # ASCII: bytes are characters
    else:
        char_bytes = 1 + (points >= 0x80) + (points >= 0x800) + (points >= 0x10000)
        char_of_byte = np.append(np.repeat(np.arange(len(points), dtype=np.int64), char_bytes), len(points))
        first, last = char_of_byte[starts], char_of_byte[np.maximum(ends - 1, starts)] + (lengths > 0)
    line_start = np.repeat(np.concatenate(([0], np.cumsum([len(line) for line in lines])[:-1])), counts)
    return np.stack([first - line_start, last - line_start], axis=1)


class SentencePieceEncoder(Encoder):
    """sentencepiece itself, for the versions it trained (several times faster than their tokenizer.json).

    Only for models whose pieces spell their input exactly (identity normalization with byte
    fallback, so no <unk>): each piece's byte length is then known, "▁" standing for a space,
    and the dummy prefix taking one byte off the first piece of a line.
    """

    def __init__(self, name: str, model: bytes, threads: int = 2) -> None:
        self.processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        size = self.processor.get_piece_size()
        byte_ids = frozenset(i for i in range(size) if self.processor.is_byte(i))
        super().__init__(name, "sentencepiece", size, self.processor.unk_id(), byte_ids, {"sentencepiece": model})
        self.threads = threads
        self.token_bytes = np.array([
            1 if i in byte_ids else 0 if self.processor.is_control(i) or self.processor.is_unknown(i)
            else len(self.processor.id_to_piece(i).replace("\u2581", " ").encode())
            for i in range(size)
        ], dtype=np.int64)

    @staticmethod
    def exact_spans(model: bytes) -> bool:
        """Whether a model's pieces spell its input exactly (identity rule, byte fallback, dummy prefix)."""
        proto = model_pb2.ModelProto.FromString(model)
        normalizer = proto.normalizer_spec
        return (normalizer.name == "identity" and proto.trainer_spec.byte_fallback
                and normalizer.add_dummy_prefix and not normalizer.remove_extra_whitespaces)

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return self.processor.encode(list(lines), num_threads=self.threads)

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        ids = self.encode(lines)
        flat, counts = _flat(ids)
        lengths = self.token_bytes[flat].copy()
        firsts = np.concatenate(([0], np.cumsum(counts)[:-1]))[counts > 0]
        lengths[firsts] -= 1  # the dummy "▁" in front of every line stands for no input byte
        totals = np.zeros(len(lines), np.int64)
        np.add.at(totals, np.repeat(np.arange(len(lines)), counts), lengths)
        if not (totals == np.fromiter((len(line.encode()) for line in lines), np.int64, len(lines))).all():
            raise ValueError(f"{self.name}: sentencepiece pieces do not spell the input; evaluate with tokenizer.json")
        spans = byte_length_spans(lines, lengths, counts)
        # A lone dummy "▁" belongs to the first word, as tokenizer.json's offsets have it.
        lone = firsts[lengths[firsts] == 0]
        spans[lone, 1] = spans[lone, 0] + 1
        return EncodedBatch(ids, flat, spans, counts)

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return self.processor.decode([list(ids) for ids in batch], num_threads=self.threads)


class TiktokenEncoder(Encoder):
    """A tiktoken Encoding; spans come from each token's byte length, for a whole batch at once."""

    def __init__(self, name: str, enc: tiktoken.Encoding, threads: int = 2, recipe: dict | None = None) -> None:
        # recipe: a reference name, or the rank file with its pattern and special tokens.
        super().__init__(name, "tiktoken", enc.n_vocab, recipe=recipe)
        self.enc = enc
        self.token_bytes = _token_lengths(enc)
        # tiktoken releases the GIL while encoding; one thread per core, each over a slice of
        # the batch (its own batch call spawns a task per line, which costs more than it saves).
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self.threads = threads

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        encode = self.enc.encode_ordinary
        if self.pool is None or len(lines) < 64:
            return [encode(line) for line in lines]
        size = -(-len(lines) // self.threads)
        parts = self.pool.map(lambda part: [encode(line) for line in part],
                              [lines[i:i + size] for i in range(0, len(lines), size)])
        return [ids for part in parts for ids in part]

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        ids = self.encode(lines)
        flat, counts = _flat(ids)
        return EncodedBatch(ids, flat, byte_length_spans(lines, self.token_bytes[flat], counts), counts)

    def decode(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return [self.enc.decode(list(ids), errors="replace") for ids in batch]

    def roundtrips(self, lines: Sequence[str], encoded: "EncodedBatch") -> int:
        """Exact, with one decode per batch: if the whole batch decodes to its bytes and every
        line's tokens hold exactly that line's byte count, every line decodes to itself."""
        data = [line.encode() for line in lines]
        per_line = np.add.reduceat(self.token_bytes[encoded.flat], np.r_[0, np.cumsum(encoded.counts)[:-1]]) \
            if len(encoded.flat) else np.zeros(len(lines), np.int64)
        per_line = np.where(encoded.counts > 0, per_line, 0)  # reduceat repeats a value for empty lines
        if (per_line == np.fromiter(map(len, data), np.int64, len(data))).all() \
                and self.enc.decode_bytes(encoded.flat.tolist()) == b"".join(data):
            return len(lines)
        return super().roundtrips(lines, encoded)


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
    return TiktokenEncoder(name, load_reference(name), recipe={"reference": name})


def version_encoders(name: str, files: dict[str, bytes], manifest: dict) -> tuple[Encoder, TiktokenEncoder | None]:
    """The encoder of a version's own library and, when it has a rank file, the tiktoken one."""
    model = files.get("tokenizer.model")
    if model is not None and SentencePieceEncoder.exact_spans(model):
        return SentencePieceEncoder(name, model), None
    slow = TokenizersEncoder(name, Tokenizer.from_str(files["tokenizer.json"].decode()))
    info = manifest.get("tiktoken") or {}
    if not info.get("file") or info["file"] not in files:
        return slow, None
    return slow, rank_file_encoder(name, files[info["file"]], info["special_tokens"], info["pat_str"])


def rank_file_encoder(name: str, rank_file: bytes, special_tokens: dict[str, int], pattern: str,
                      threads: int = 2) -> TiktokenEncoder:
    """A tiktoken encoder from a version's .tiktoken file and what its manifest says about it."""
    enc = tiktoken_encoding(name, parse_rank_file(rank_file), special_tokens, pattern)
    recipe = {"rank_file": rank_file, "special_tokens": special_tokens, "pattern": pattern}
    return TiktokenEncoder(name, enc, threads, recipe)


def proven_encoder(slow: Encoder, fast: TiktokenEncoder | None, sample: Sequence[str]) -> Encoder:
    """The fast encoder if its ids equal the slow one's on every sample line, else the slow one."""
    if fast is None:
        return slow
    return fast if fast.encode(sample) == slow.encode(sample) else slow
