"""Encoders for evaluation: one interface over `tokenizers`, sentencepiece and tiktoken.

An encoder turns a batch of lines into token ids, each token's character span and how many
lines decode back to themselves, never adding special tokens and treating special-token
strings inside text as plain text (`encode_special_tokens=True` / `encode_ordinary`).
Byte-level BPE versions with a rank file are encoded by tiktoken, several times faster, once
its ids are shown equal to the `tokenizers` ids on the text at hand (see `proven_encoder`);
sentencepiece versions whose pieces spell their input, by sentencepiece, a word at a time
where the same is shown (`tokenmill.evaluation.word_cache`). Spans and round
trips come from the ids' spelling (`tokenmill.evaluation.spelling`) wherever it is proven, and from
offsets and a real decode elsewhere.

How many cores an evaluation uses is one setting, `evaluation_threads`
(TOKENMILL_EVALUATION_THREADS): tiktoken's and sentencepiece's threads, tokenizers' batch
encode on its own thread pool or line by line, and (tokenmill.evaluation.measuring) the measuring
processes. Python threads exist only inside `encoding_threads`, which ends them.
"""

import base64
import itertools
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypedDict, cast

import numpy as np
import sentencepiece
import tiktoken
from tokenizers import Encoding, Tokenizer

from tokenmill.corpora.words import code_points
from tokenmill.evaluation.references import load_reference
from tokenmill.evaluation.spelling import Spelling, WordPieceSpelling, byte_length_spans, utf8_widths
from tokenmill.evaluation.word_cache import applies as word_cache_applies
from tokenmill.evaluation.word_cache import word_cache
from tokenmill.formats import sentencepiece_model
from tokenmill.formats.sentencepiece_model import ModelProto
from tokenmill.formats.tiktoken_format import encoding as tiktoken_encoding
from tokenmill.formats.tiktoken_format import parse_rank_file
from tokenmill.settings import get_settings

Spans = list[tuple[int, int]]


class Recipe(TypedDict, total=False):
    """How another process builds an encoder (tokenmill.evaluation.shards): a reference, a tokenizer.json,
    a sentencepiece model or a rank file, and the encoder's name (added by the sender)."""

    name: str
    reference: str
    tokenizer_json: str
    sentencepiece: bytes
    cache_words: bool
    rank_file: bytes
    special_tokens: dict[str, int]
    pattern: str


def evaluation_threads() -> int:
    """How many cores an evaluation may use: the `evaluation_threads` setting."""
    return get_settings().evaluation_threads


class _Threads:
    """The Python threads of the evaluations running in this process: one that encodes the next
    batch while the metrics take this one (`ahead`), and those tiktoken encodes a batch's slices
    on (`slices`, none for one thread). Opened by the outermost `encoding_threads`, ended with it."""

    lock = threading.Lock()
    users = 0
    ahead: ThreadPoolExecutor | None = None
    slices: ThreadPoolExecutor | None = None


def _reset_after_fork() -> None:
    # A forked child has none of its parent's threads (and maybe a lock another thread held).
    _Threads.lock, _Threads.users, _Threads.ahead, _Threads.slices = threading.Lock(), 0, None, None


os.register_at_fork(after_in_child=_reset_after_fork)


@contextmanager
def encoding_threads() -> Iterator[None]:
    """Meanwhile, encoders may use threads (`evaluation_threads` of them, and one encoding ahead);
    they start when the outermost of these contexts opens (nested ones share them) and are ended,
    joined, when it closes, so no thread outlives an evaluation. Outside, encoders use none."""
    with _Threads.lock:
        if _Threads.users == 0:
            threads = evaluation_threads()
            _Threads.ahead = ThreadPoolExecutor(1, thread_name_prefix="tokenmill-encode-ahead")
            _Threads.slices = (ThreadPoolExecutor(threads, thread_name_prefix="tokenmill-encode")
                               if threads > 1 else None)
        _Threads.users += 1
    try:
        yield
    finally:
        with _Threads.lock:
            _Threads.users -= 1
            ended = (_Threads.ahead, _Threads.slices) if _Threads.users == 0 else ()
            if ended:
                _Threads.ahead = _Threads.slices = None
        for pool in ended:
            if pool is not None:
                pool.shutdown(wait=True)


def ahead_pool() -> ThreadPoolExecutor | None:
    """The thread that encodes the next batch ahead, inside `encoding_threads`; None outside."""
    return _Threads.ahead


@dataclass
class EncodedBatch:
    """A batch of lines encoded: flat ids, their (n, 2) character spans, tokens per line, and
    how many lines decode back to themselves."""

    flat: np.ndarray
    spans: np.ndarray
    counts: np.ndarray
    roundtrips: int

    def line(self, index: int) -> tuple[list[int], Spans]:
        """The ids and spans of one line of the batch."""
        start = int(self.counts[:index].sum())
        end = start + int(self.counts[index])
        return self.flat[start:end].tolist(), [tuple(pair) for pair in self.spans[start:end].tolist()]


@dataclass
class Encoder:
    """What the metrics need to know about a tokenizer, and how to run it.

    An encoder gives ids (`encode`, and flat in `_ids`) and, for any lines, ids, spans and
    round trips the slow and sure way (`_exact`). Where its ids spell their input
    (`spelling`), `encode_batch` takes spans and round trips from the spelling instead, and
    only the lines it does not prove go the exact way.
    """

    name: str
    encoded_by: str  # what runs it: tokenizers, sentencepiece (+word cache) or tiktoken; in its metrics
    vocab_size: int
    unk_id: int | None = None
    byte_fallback_ids: frozenset[int] = field(default_factory=frozenset)
    # How another process builds the same encoder (tokenmill.evaluation.shards), if it can.
    recipe: Recipe | None = None
    spelling: Spelling | None = None

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        raise NotImplementedError

    def begin(self) -> None:
        """Called before each measurement: forget what the last one learnt."""

    def _ids(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Flat ids and tokens per line."""
        return _flat(self.encode(lines))

    def _exact(self, lines: Sequence[str]) -> EncodedBatch:
        raise NotImplementedError

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        if self.spelling is None:
            return self._exact(lines)
        return self._checked(self.spelling, lines, *self._ids(lines))

    def _checked(self, spelling: Spelling, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray) -> EncodedBatch:
        """The lines with their ids: spans and round trips from the spelling where it proves
        them, the exact path elsewhere."""
        checked = spelling.check(lines, flat, counts)
        spelled = EncodedBatch(flat, checked.spans, counts, int(checked.roundtrips.sum()))
        if checked.spelled.all():
            return spelled
        others = [lines[i] for i in np.flatnonzero(~checked.spelled).tolist()]
        return _merged(spelled, checked.spelled, self._exact(others))


def _merged(batch: EncodedBatch, kept: np.ndarray, other: EncodedBatch) -> EncodedBatch:
    """The batch with the tokens of the lines not `kept` taken from `other`, which encoded just
    those lines. Few lines are replaced, so the tokens are copied in slices around them."""
    counts = batch.counts.copy()
    counts[~kept] = other.counts
    ends, other_ends = np.cumsum(batch.counts), np.cumsum(other.counts)
    flat, spans, resume = [], [], 0
    for index, line in enumerate(np.flatnonzero(~kept).tolist()):
        own_to = ends[line] - batch.counts[line]
        other_from, other_to = other_ends[index] - other.counts[index], other_ends[index]
        flat += [batch.flat[resume:own_to], other.flat[other_from:other_to]]
        spans += [batch.spans[resume:own_to], other.spans[other_from:other_to]]
        resume = ends[line]
    flat.append(batch.flat[resume:])
    spans.append(batch.spans[resume:])
    return EncodedBatch(np.concatenate(flat), np.concatenate(spans), counts, batch.roundtrips + other.roundtrips)


def _flat(ids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    counts = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(counts.sum()))
    return flat, counts


def _roundtrips(lines: Sequence[str], decoded: Sequence[str]) -> int:
    return sum(back == line for line, back in zip(lines, decoded))


class TokenizersEncoder(Encoder):
    """A `tokenizers.Tokenizer`. With more than one evaluation thread, batch-encoded on tokenizers'
    own thread pool (its size is the library's, fixed once per process and shared with training);
    with one, on the calling thread (line by line, unless TOKENIZERS_PARALLELISM=false already
    makes the batch encode serial, as in tokenmill.evaluation.shards' workers)."""

    def __init__(self, name: str, tokenizer: Tokenizer, threads: int | None = None) -> None:
        tokenizer.encode_special_tokens = True
        serialized = tokenizer.to_str()
        data = json.loads(serialized)
        model = data["model"]
        unk = model.get("unk_token")
        unk_id = model.get("unk_id") if model.get("type") == "Unigram" else (tokenizer.token_to_id(unk) if unk else None)
        byte_ids: frozenset[int] = frozenset()
        if model.get("byte_fallback"):
            byte_ids = frozenset(i for v in range(256) if (i := tokenizer.token_to_id(f"<0x{v:02X}>")) is not None)
        spelling = metaspace_spelling(tokenizer, data) or wordpiece_spelling(tokenizer, data)
        super().__init__(name, "tokenizers", tokenizer.get_vocab_size(with_added_tokens=True), unk_id, byte_ids,
                         {"tokenizer_json": serialized}, spelling)
        self.tokenizer = tokenizer
        self.threads = threads

    def _line_by_line(self) -> bool:
        """Whether a batch is encoded a line at a time: one thread, and tokenizers' batch encode
        would use its pool (tokenizers reads TOKENIZERS_PARALLELISM at each call, as this does)."""
        switch = os.environ.get("TOKENIZERS_PARALLELISM")
        return (self.threads or evaluation_threads()) == 1 and (switch is None or switch.lower() not in _PARALLELISM_OFF)

    def _encodings(self, lines: Sequence[str], fast: bool = False) -> list[Encoding]:
        if self._line_by_line():
            return [self.tokenizer.encode(line, add_special_tokens=False) for line in lines]
        encode = self.tokenizer.encode_batch_fast if fast else self.tokenizer.encode_batch
        return encode(list(lines), add_special_tokens=False)

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        return [e.ids for e in self._encodings(lines)]

    def _ids(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        # Without offsets (all zeros here): the spelling gives spans, and encoding is faster.
        return _flat([e.ids for e in self._encodings(lines, fast=True)])

    def _exact(self, lines: Sequence[str]) -> EncodedBatch:
        encodings = self._encodings(lines)
        ids = [e.ids for e in encodings]
        flat, counts = _flat(ids)
        offsets = itertools.chain.from_iterable(itertools.chain.from_iterable(e.offsets for e in encodings))
        spans = np.fromiter(offsets, dtype=np.int64, count=2 * len(flat)).reshape(-1, 2)
        return EncodedBatch(flat, spans, counts, _roundtrips(lines, self.tokenizer.decode_batch(ids, skip_special_tokens=False)))


# The values of TOKENIZERS_PARALLELISM with which tokenizers encodes a batch serially.
_PARALLELISM_OFF = ("", "off", "false", "f", "no", "n", "0")

# tokenizer.json parts with which a "▁" model spells its input: a "▁" in front of the line and
# for every space, split before each "▁" (and before a literal "<0x..>"), decoded by turning
# "▁" back into spaces, bytes back into characters, fusing, and only then dropping the first
# space (Strip works on each token).
_METASPACE_NORMALIZERS = ({"type": "Prepend", "prepend": "\u2581"},
                          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                          {"type": "Replace", "pattern": {"Regex": "\\A\u2581(?=<unk>|<s>|</s>)"}, "content": ""})
_METASPACE_PRE_TOKENIZERS = ({"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "never", "split": True},
                             {"type": "Split", "pattern": {"Regex": "<(?=0x[0-9A-F]{2}>)"}, "behavior": "Isolated", "invert": False})
_METASPACE_DECODERS = ({"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                       {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0})


def _steps(part: dict[str, Any] | None, key: str) -> list[dict[str, Any]]:
    if part is None:
        return []
    return part[key] if part["type"] == "Sequence" else [part]


def metaspace_spelling(tokenizer: Tokenizer, data: dict[str, Any]) -> Spelling | None:
    """How a "▁" BPE or Unigram model spells its input; None for any other tokenizer."""
    model = data["model"]
    normalizers, pre_tokenizers = _steps(data["normalizer"], "normalizers"), _steps(data["pre_tokenizer"], "pretokenizers")
    decoders = _steps(data["decoder"], "decoders")
    if (model["type"] not in ("BPE", "Unigram") or model.get("dropout") or model.get("continuing_subword_prefix")
            or model.get("end_of_word_suffix") or not normalizers or normalizers[0] != _METASPACE_NORMALIZERS[0]
            or not all(step in _METASPACE_NORMALIZERS for step in normalizers)
            or _METASPACE_PRE_TOKENIZERS[0] not in pre_tokenizers
            or not all(step in _METASPACE_PRE_TOKENIZERS for step in pre_tokenizers)
            or decoders not in (list(_METASPACE_DECODERS), [d for d in _METASPACE_DECODERS if d["type"] != "ByteFallback"])):
        return None
    byte_fallback = {"type": "ByteFallback"} in decoders  # how the decoder reads "<0xAB>" tokens
    special = {token["id"] for token in data["added_tokens"]}
    unk = model.get("unk_id") if model["type"] == "Unigram" else tokenizer.token_to_id(model.get("unk_token") or "")

    def piece(i: int) -> bytes | None:
        token = tokenizer.id_to_token(i)
        if token is None or i in special or i == unk:
            return None
        return _metaspace_bytes(token, byte_fallback and len(token) == 6 and token.startswith("<0x") and token.endswith(">"))

    return Spelling.of([piece(i) for i in range(tokenizer.get_vocab_size(with_added_tokens=True))], dummy_prefix=True)


def _metaspace_bytes(piece: str, byte: bool) -> bytes:
    """The bytes a "▁" model's piece stands for: "<0xAB>" one byte if `byte`, "▁" a space."""
    return bytes([int(piece[3:5], 16)]) if byte else piece.replace("\u2581", " ").encode()


def wordpiece_spelling(tokenizer: Tokenizer, data: dict[str, Any]) -> WordPieceSpelling | None:
    """How a WordPiece model spells its input, if nothing normalizes it and its pre-tokenizer
    only drops whitespace; None for any other tokenizer. How the decoder joins each token to
    the one before is asked of the decoder itself, token by token."""
    model, decoder = data["model"], data["decoder"] or {}
    prefix = model.get("continuing_subword_prefix")
    if (model["type"] != "WordPiece" or data["normalizer"] is not None or not prefix
            or (data["pre_tokenizer"] or {}).get("type") not in ("Whitespace", "WhitespaceSplit", "BertPreTokenizer")
            or decoder.get("type") != "WordPiece" or decoder.get("prefix") != prefix):
        return None
    special = {token["id"] for token in data["added_tokens"]} | {tokenizer.token_to_id(model.get("unk_token") or "")}
    pieces, glued, continuing = [], [], []
    for i in range(tokenizer.get_vocab_size(with_added_tokens=True)):
        token = tokenizer.id_to_token(i) or ""  # "": an id without a token spells nothing
        piece = token[len(prefix):] if token.startswith(prefix) else token
        fixed = bool(piece) and i not in special and not any(c.isspace() for c in piece)
        # After another token, the decoder writes it glued on or after a space (a first token
        # is written as it is, "##" and all: `continuing` tells those apart).
        after = tokenizer.decoder.decode(["x", token]) if fixed else None
        pieces.append(piece if after in ("x" + piece, "x " + piece) else None)
        glued.append(after == "x" + piece)
        continuing.append(piece != token)
    return WordPieceSpelling.of_pieces(pieces, glued, continuing)


class SentencePieceEncoder(Encoder):
    """sentencepiece itself, for the versions it trained (several times faster than their tokenizer.json).

    Only for models whose pieces spell their input (identity normalization with byte
    fallback, so no <unk>): "▁" stands for a space, and the dummy prefix for no byte. With
    `cache_words`, each distinct word is encoded once (`tokenmill.evaluation.word_cache`).
    """

    spelling: Spelling  # always: its pieces spell its input

    def __init__(self, name: str, model: bytes, threads: int | None = None, cache_words: bool = False) -> None:
        self.processor = sentencepiece.SentencePieceProcessor(model_proto=model)
        size = self.processor.get_piece_size()
        byte_ids = frozenset(i for i in range(size) if self.processor.is_byte(i))
        pieces = [None if self.processor.is_control(i) or self.processor.is_unknown(i)
                  else _metaspace_bytes(self.processor.id_to_piece(i), i in byte_ids) for i in range(size)]
        super().__init__(name, "sentencepiece+word cache" if cache_words else "sentencepiece", size,
                         self.processor.unk_id(), byte_ids, {"sentencepiece": model, "cache_words": cache_words},
                         Spelling.of(pieces, dummy_prefix=True))
        self.threads = threads
        self.words = (word_cache(sentencepiece_model.parse(model), self._direct, pieces, byte_ids)
                      if cache_words else None)

    @staticmethod
    def exact_spans(proto: ModelProto) -> bool:
        """Whether a model's pieces spell its input (identity rule, byte fallback, dummy prefix)."""
        normalizer = proto.normalizer_spec
        return (normalizer.name == "identity" and proto.trainer_spec.byte_fallback
                and normalizer.add_dummy_prefix and not normalizer.remove_extra_whitespaces)

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        if self.words is None:
            return self._direct(lines)
        batch = self.encode_batch(lines)
        return [part.tolist() for part in np.split(batch.flat, np.cumsum(batch.counts)[:-1])] if len(lines) else []

    def encode_batch(self, lines: Sequence[str]) -> EncodedBatch:
        """From the word cache where it has one, with spans read off its pieces (its sure lines
        decode back to themselves: their pieces spell them); the unsure lines as any others."""
        words = None if self.words is None else self.words.encode(lines)
        if words is None:
            return self._checked(self.spelling, lines, *_flat(self._direct(lines)))
        cached = EncodedBatch(words.flat, words.spans, words.counts, int(len(lines) - words.unsure.sum()))
        if not words.unsure.any():
            return cached
        unsure = [lines[i] for i in np.flatnonzero(words.unsure).tolist()]
        return _merged(cached, ~words.unsure, self._checked(self.spelling, unsure, *_flat(self._direct(unsure))))

    def _direct(self, lines: Sequence[str]) -> list[list[int]]:
        if len(lines) < 16:  # a few lines (the word cache's unsure ones): no thread pool to start
            return [self.processor.encode(line) for line in lines]
        ids = self.processor.encode(list(lines), num_threads=self.threads or evaluation_threads())
        return cast(list[list[int]], ids)  # sentencepiece's stubs give Any: ids per line, for a list of lines

    def begin(self) -> None:
        if self.words is not None:
            self.words.clear()

    def _exact(self, lines: Sequence[str]) -> EncodedBatch:
        """Spans from each piece's byte offsets in the line (a piece without bytes of its own, as
        the dummy prefix or all but the last byte of a character, gets the character it is at)."""
        ids, spans = [], []
        for line in lines:
            pieces = self.processor.encode(line, return_type="proto").pieces
            widths = utf8_widths(code_points(line))
            char_of_byte = np.append(np.repeat(np.arange(len(line), dtype=np.int64), widths), len(line))
            ids.append([p.id for p in pieces])
            spans += [(int(char_of_byte[p.begin]), int(char_of_byte[p.end - 1]) + 1) if p.end > p.begin
                      else (int(char_of_byte[p.begin]), min(int(char_of_byte[p.begin]) + 1, len(line)))
                      for p in pieces]
        flat, counts = _flat(ids)
        decoded = self.processor.decode(ids, num_threads=self.threads or evaluation_threads())
        return EncodedBatch(flat, np.array(spans, dtype=np.int64).reshape(-1, 2), counts, _roundtrips(lines, decoded))


class TiktokenEncoder(Encoder):
    """A tiktoken Encoding; its ranks spell their input, byte for byte."""

    spelling: Spelling

    def __init__(self, name: str, enc: tiktoken.Encoding, threads: int | None = None,
                 recipe: Recipe | None = None) -> None:
        # recipe: a reference name, or the rank file with its pattern and special tokens.
        super().__init__(name, "tiktoken", enc.n_vocab, recipe=recipe, spelling=Spelling.of(_token_bytes(enc)))
        self.enc = enc
        self.threads = threads  # None: the evaluation_threads setting

    def encode(self, lines: Sequence[str]) -> list[list[int]]:
        # tiktoken releases the GIL while encoding; one thread per core, each over a slice of
        # the batch (its own batch call spawns a task per line, which costs more than it saves),
        # on the threads of `encoding_threads` (outside it, on this one).
        encode = self.enc.encode_ordinary
        threads, pool = self.threads or evaluation_threads(), _Threads.slices
        if pool is None or threads < 2 or len(lines) < 64:
            return [encode(line) for line in lines]
        size = -(-len(lines) // threads)
        parts = pool.map(lambda part: [encode(line) for line in part],
                         [lines[i:i + size] for i in range(0, len(lines), size)])
        return [ids for part in parts for ids in part]

    def _exact(self, lines: Sequence[str]) -> EncodedBatch:
        ids = self.encode(lines)
        flat, counts = _flat(ids)
        lengths = np.maximum(self.spelling.lengths[flat], 0)
        spans = [byte_length_spans([line], lengths[start:start + count], count[None])
                 for line, start, count in zip(lines, np.cumsum(counts) - counts, counts)]
        decoded = [self.enc.decode(line_ids, errors="replace") for line_ids in ids]
        return EncodedBatch(flat, np.concatenate(spans) if spans else np.zeros((0, 2), np.int64), counts,
                            _roundtrips(lines, decoded))


def _token_bytes(enc: tiktoken.Encoding) -> list[bytes | None]:
    pieces: list[bytes | None] = []
    for rank in range(enc.n_vocab):
        try:
            pieces.append(None if enc.is_special_token(rank) else enc.decode_single_token_bytes(rank))
        except KeyError:
            pieces.append(None)  # an unused id between the ranks and the special tokens
    return pieces


@cache
def reference_encoder(name: str, threads: int | None = None) -> TiktokenEncoder:
    """GPT-2, cl100k_base or o200k_base, from their verified rank files."""
    return TiktokenEncoder(name, load_reference(name), threads, recipe={"reference": name})


def version_encoders(name: str, files: dict[str, bytes], manifest: dict[str, Any]) -> tuple[Encoder, Encoder | None]:
    """The encoder of a version's own library and, where one applies, a faster one to prove on
    each corpus: tiktoken on its rank file, or sentencepiece a word at a time."""
    model = files.get("tokenizer.model")
    if model is not None and SentencePieceEncoder.exact_spans(proto := sentencepiece_model.parse(model)):
        fast = SentencePieceEncoder(name, model, cache_words=True) if word_cache_applies(proto) else None
        return SentencePieceEncoder(name, model), fast
    slow = TokenizersEncoder(name, Tokenizer.from_str(files["tokenizer.json"].decode()))
    info = manifest.get("tiktoken") or {}
    if not info.get("file") or info["file"] not in files:
        return slow, None
    return slow, rank_file_encoder(name, files[info["file"]], info["special_tokens"], info["pat_str"])


def rank_file_encoder(name: str, rank_file: bytes, special_tokens: dict[str, int], pattern: str,
                      threads: int | None = None) -> TiktokenEncoder:
    """A tiktoken encoder from a version's .tiktoken file and what its manifest says about it."""
    enc = tiktoken_encoding(name, parse_rank_file(rank_file), special_tokens, pattern)
    recipe: Recipe = {"rank_file": rank_file, "special_tokens": special_tokens, "pattern": pattern}
    return TiktokenEncoder(name, enc, threads, recipe)


def proven_encoder(slow: Encoder, fast: Encoder | None, sample: Sequence[str]) -> Encoder:
    """The fast encoder if its ids equal the slow one's on every sample line, else the slow one."""
    if fast is None:
        return slow
    return fast if fast.encode(sample) == slow.encode(sample) else slow


def recipe_encoder(recipe: Recipe, threads: int | None = None) -> Encoder:
    """The encoder another process described in `recipe`."""
    if "reference" in recipe:
        return reference_encoder(recipe["reference"], threads)
    if "sentencepiece" in recipe:
        return SentencePieceEncoder(recipe["name"], recipe["sentencepiece"], threads, cache_words=recipe["cache_words"])
    if "tokenizer_json" in recipe:
        return TokenizersEncoder(recipe["name"], Tokenizer.from_str(recipe["tokenizer_json"]), threads)
    return rank_file_encoder(recipe["name"], recipe["rank_file"], recipe["special_tokens"], recipe["pattern"], threads)


_RECIPE_BYTES = ("sentencepiece", "rank_file")  # a recipe's fields that hold bytes


def recipe_json(recipe: Recipe) -> bytes:
    """A recipe as JSON, its bytes in base64, for a worker on another machine (`recipe_from_json`)."""
    fields: dict[str, Any] = dict(recipe)
    return json.dumps({key: base64.b64encode(value).decode() if key in _RECIPE_BYTES else value
                       for key, value in fields.items()}).encode()


def recipe_from_json(data: bytes) -> Recipe:
    fields = json.loads(data)
    return cast(Recipe, {key: base64.b64decode(value) if key in _RECIPE_BYTES else value for key, value in fields.items()})
