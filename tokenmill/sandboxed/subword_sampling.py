"""Subword regularisation: seeded BPE-dropout and Unigram sampling of one text, as options of an encode.

A sampled encode gives one of the segmentations a model could have seen in training instead of
the single best one (Provilkov et al. 2020 for BPE-dropout, Kudo 2018 for Unigram sampling).
Both samplers are ours, seeded with `random.Random(seed)`, so the same text, options and seed
give the same ids in any process:

- BPE (tokenizers, rustbpe and sentencepiece versions alike): the version's merges, in a loop
  of our own since tokenizers' `model.dropout` cannot be seeded. At each step, among every
  applicable merge in rank order (leftmost first), each is dropped with probability `dropout`
  and the first one kept is applied; the dropped ones come back for the next step; no merge
  kept ends the word. `dropout` 0 is the plain encode.
- Unigram: the version's lattice over each pre-tokenized piece, sampled by forward-filtering
  backward-sampling with scores times `alpha` (`nbest_size` -1), or one of the piece's
  `nbest_size` best segmentations with probability proportional to exp(alpha * score):
  sentencepiece's two modes, a piece at a time. Pieces never span two words, so the first
  mode samples from the same distribution as over the whole line; the second picks among each
  word's n best, where sentencepiece picks among the line's.

The normalizer, pre-tokenizer and offsets are the version's own tokenizer.json run by
`tokenizers` (a `PreTokenizedString` whose pieces our samplers cut), so a sampled encode
differs from the plain one only in how pieces are cut. As in the playground's plain encode,
special-token text in the input is encoded as text. sentencepiece versions sample through their
tokenizer.json too (the same pieces, scores and merges, the same ids): sentencepiece 0.2.3's own
sampling is not reproducible, even after `set_random_generator_seed` (its generator is
per thread, and the same seed gives other ids in another process; tests/unit/test_subword_sampling.py).

Deliberately not handled: WordPiece (greedy longest match: no sampling is defined for it),
added tokens that are not special (no version has them), and tokenizers' BPE cache and
`max_token_length` (they never change a result).
"""

import heapq
import json
import math
import random
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tokenmill.errors import InvalidInput

MAX_SEED = 2**31 - 1
MAX_NBEST = 64
MAX_ALPHA = 10.0
DEFAULT_DROPOUT = 0.1  # the paper's choice for most languages
DEFAULT_ALPHA = 0.1
DEFAULT_NBEST = -1
# What a sampled encode uses for a value neither the request nor the version gives.
DEFAULTS: dict[str, Any] = {"dropout": DEFAULT_DROPOUT, "alpha": DEFAULT_ALPHA, "nbest_size": DEFAULT_NBEST, "seed": 0}
UNKNOWN_PENALTY = 10.0  # tokenizers' and sentencepiece's score of an unknown character: lowest minus this

Encoded = tuple[list[int], list[str], list[tuple[int, int]]]
Cut = tuple[int, str, tuple[int, int]]  # a token of a piece: id, token, byte span in the piece
Lattice = list[list[tuple[int, int, float]]]  # `UnigramSampler.lattice`


class SamplingOptions(BaseModel):
    """What an encode samples with; a missing field takes the version's recorded default, then ours."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dropout: float | None = Field(None, ge=0, lt=1, description="BPE: probability of dropping each merge")
    alpha: float | None = Field(None, gt=0, le=MAX_ALPHA, description="Unigram: smoothing (scores times alpha)")
    nbest_size: int | None = Field(None, ge=-1, le=MAX_NBEST,
                                   description="Unigram: -1 samples every segmentation, 2..64 the n best")
    seed: int | None = Field(None, ge=0, le=MAX_SEED)

    @field_validator("nbest_size")
    @classmethod
    def _sampling_size(cls, value: int | None) -> int | None:
        if value in (0, 1):
            raise PydanticCustomError("nbest_size", "must be -1 (every segmentation) or 2 to {cap} (the n best): "
                                      "0 and 1 do not sample", {"cap": MAX_NBEST})
        return value


class SamplingDefaults(SamplingOptions):
    """The spec's `sampling`: defaults recorded with a version (manifest.json and its spec)."""

    dropout_file: bool = Field(False, description="BPE: also write tokenizer.dropout.json, whose model.dropout is set")

    @model_validator(mode="before")
    @classmethod
    def _from_json_text(cls, value: Any) -> Any:
        # The new-job form has a text input per spec field: this one holds JSON.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                raise PydanticCustomError("json_object", 'is not a JSON object such as {"dropout": 0.1}') from None
        return value


@dataclass(frozen=True)
class Sampling:
    """Resolved options of one sampled encode."""

    method: str  # "bpe-dropout" | "unigram"
    seed: int
    dropout: float | None = None
    alpha: float | None = None
    nbest_size: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {key: value for key, value in self.__dict__.items() if value is not None}


def method_of(spec: dict[str, Any]) -> str | None:
    """How a version with this spec samples: "bpe-dropout", "unigram", or None (WordPiece)."""
    return {"bpe": "bpe-dropout", "unigram": "unigram"}.get(spec.get("algorithm", "bpe"))


def refusal(algorithm: str, options: SamplingOptions, prefix: str) -> tuple[str, str] | None:
    """(field, reason) when options do not fit the algorithm; `prefix` names where they were given."""
    method = method_of({"algorithm": algorithm})
    if method is None:
        return prefix, f"{algorithm} has no subword sampling (a greedy longest match): only bpe and unigram sample"
    if method == "bpe-dropout":
        for name in ("alpha", "nbest_size"):
            if getattr(options, name) is not None:
                return f"{prefix}.{name}", "applies to unigram versions; a bpe version samples with 'dropout'"
        if isinstance(options, SamplingDefaults) and options.dropout_file and options.dropout is None:
            return f"{prefix}.dropout", "dropout_file needs the dropout to write into tokenizer.dropout.json"
    else:
        if options.dropout is not None:
            return f"{prefix}.dropout", "applies to bpe versions; a unigram version samples with 'alpha' and 'nbest_size'"
        if isinstance(options, SamplingDefaults) and options.dropout_file:
            return f"{prefix}.dropout_file", "tokenizer.json records a dropout for bpe only (its Unigram keeps no alpha)"
    return None


def resolve(spec: dict[str, Any], options: SamplingOptions) -> Sampling:
    """The options of a sampled encode with a version of this spec: given, else recorded, else ours."""
    if (why := refusal(spec.get("algorithm", "bpe"), options, "sampling")) is not None:
        raise InvalidInput(f"'{why[0]}' {why[1]}", field=why[0])
    recorded = spec.get("sampling") or {}

    def pick(name: str) -> Any:
        return chosen(name, getattr(options, name), recorded)

    seed = pick("seed")
    if method_of(spec) == "bpe-dropout":
        return Sampling("bpe-dropout", seed, dropout=pick("dropout"))
    return Sampling("unigram", seed, alpha=pick("alpha"), nbest_size=pick("nbest_size"))


def chosen(name: str, given: Any, recorded: dict[str, Any]) -> Any:
    """One sampling value: given, else the version's recorded default, else ours (DEFAULTS)."""
    if given is not None:
        return given
    return recorded[name] if recorded.get(name) is not None else DEFAULTS[name]


# ---- BPE-dropout: our merge loop --------------------------------------------------------------

class BpeDropout:
    """A tokenizer.json BPE model, encoding a pre-tokenized piece with seeded merge dropout."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.vocab: dict[str, int] = model["vocab"]
        self.tokens = {i: token for token, i in self.vocab.items()}
        self.prefix = model.get("continuing_subword_prefix") or ""
        self.suffix = model.get("end_of_word_suffix") or ""
        self.byte_fallback = bool(model.get("byte_fallback"))
        self.ignore_merges = bool(model.get("ignore_merges"))
        self.fuse_unk = bool(model.get("fuse_unk"))
        self.unk = self.vocab.get(model.get("unk_token") or "")
        self.merges: dict[tuple[int, int], tuple[int, int]] = {}  # (left id, right id) -> (rank, merged id)
        for rank, merge in enumerate(model["merges"]):
            left, right = merge if isinstance(merge, list) else merge.split(" ", 1)
            tail = right[len(self.prefix):] if self.prefix and right.startswith(self.prefix) else right
            if left in self.vocab and right in self.vocab and (left + tail) in self.vocab:
                self.merges[(self.vocab[left], self.vocab[right])] = (rank, self.vocab[left + tail])

    def symbols(self, piece: str) -> list[list[int]]:
        """The piece's starting symbols as [id, byte length], as tokenizers' merge_word builds them."""
        out: list[list[int]] = []
        unknown: list[int] | None = None  # a pending unknown symbol [unk id, byte length]
        for index, char in enumerate(piece):
            size = len(char.encode("utf-8"))
            text = (self.prefix if index and self.prefix else "") + char + (self.suffix if index == len(piece) - 1 else "")
            if text in self.vocab or (self.byte_fallback and all(f"<0x{b:02X}>" in self.vocab for b in text.encode())):
                if unknown:
                    out.append(unknown)
                    unknown = None
                if text in self.vocab:
                    out.append([self.vocab[text], size])
                else:
                    out.extend([self.vocab[f"<0x{b:02X}>"], 1] for b in text.encode())
            elif self.unk is not None:
                if unknown and self.fuse_unk:
                    unknown[1] += size
                else:
                    if unknown:
                        out.append(unknown)
                    unknown = [self.unk, size]
        if unknown:
            out.append(unknown)
        return out

    def encode(self, piece: str, dropout: float, rng: random.Random) -> list[tuple[int, str, tuple[int, int]]]:
        """(id, token, byte span in the piece) of each token of one pre-tokenized piece."""
        if not piece:
            return []
        if self.ignore_merges and dropout == 0 and piece in self.vocab:
            return [(self.vocab[piece], piece, (0, len(piece.encode("utf-8"))))]
        symbols = self.symbols(piece)  # [id, byte length], linked by prev/next below
        prev = list(range(-1, len(symbols) - 1))
        nxt = [*range(1, len(symbols)), -1]
        queue = [(found[0], pos, found[1]) for pos in range(len(symbols) - 1)
                 if (found := self.merges.get((symbols[pos][0], symbols[pos + 1][0])))]  # (rank, position, merged id)
        heapq.heapify(queue)
        dropped: list[tuple[int, int, int]] = []
        while queue:
            # The best applicable merge left at this step (rank, then position); stale entries are skipped.
            rank, pos, new = heapq.heappop(queue)
            right = nxt[pos]
            if symbols[pos][1] == 0 or right < 0 or self.merges.get((symbols[pos][0], symbols[right][0])) != (rank, new):
                continue
            if dropout and rng.random() < dropout:
                dropped.append((rank, pos, new))  # this merge sits out this step only
                continue
            for entry in dropped:
                heapq.heappush(queue, entry)
            dropped.clear()
            # Merge: the left symbol absorbs the right one, which is unlinked.
            symbols[pos] = [new, symbols[pos][1] + symbols[right][1]]
            symbols[right][1] = 0
            nxt[pos] = nxt[right]
            if nxt[pos] >= 0:
                prev[nxt[pos]] = pos
            # The pairs the new symbol makes with its neighbours are candidates now.
            for left, right_ in ((prev[pos], pos), (pos, nxt[pos])):
                if left >= 0 and right_ >= 0 and (found := self.merges.get((symbols[left][0], symbols[right_][0]))):
                    heapq.heappush(queue, (found[0], left, found[1]))
        out, start, pos = [], 0, 0 if symbols else -1
        while pos >= 0:
            token_id, size = symbols[pos]
            out.append((token_id, self.tokens[token_id], (start, start + size)))
            start += size
            pos = nxt[pos]
        return out


# ---- Unigram sampling: the lattice of a piece -------------------------------------------------

class UnigramSampler:
    """A tokenizer.json Unigram model, sampling segmentations of a pre-tokenized piece."""

    def __init__(self, model: dict[str, Any]) -> None:
        self.pieces = {piece: (i, score) for i, (piece, score) in enumerate(model["vocab"])}
        self.longest = max((len(piece) for piece in self.pieces), default=1)
        self.unk: int | None = model.get("unk_id")
        self.byte_fallback = bool(model.get("byte_fallback"))
        self.unknown_score = min((score for _, score in model["vocab"]), default=0.0) - UNKNOWN_PENALTY

    def lattice(self, piece: str) -> Lattice:
        """Nodes (start, id or -1 for unknown, score) ending at each character position, by start."""
        ends: Lattice = [[] for _ in range(len(piece) + 1)]
        for start in range(len(piece)):
            single = False
            for end in range(start + 1, min(len(piece), start + self.longest) + 1):
                if (found := self.pieces.get(piece[start:end])) is not None:
                    ends[end].append((start, found[0], found[1]))
                    single = single or end == start + 1
            if not single:  # no piece of exactly this character: an unknown node over it
                ends[start + 1].append((start, -1, self.unknown_score))
        return ends

    def sample(self, piece: str, alpha: float, nbest_size: int, rng: random.Random) -> list[tuple[int, int, int]]:
        """(start, end, id or -1) of a sampled segmentation; nbest_size 1 is the best one (Viterbi)."""
        ends = self.lattice(piece)
        if nbest_size < 0:
            return self._forward_backward(ends, alpha, rng)
        paths = self._nbest(ends, nbest_size)
        weights = [alpha * score for score, _ in paths]
        top = max(weights)
        chosen = rng.choices(range(len(paths)), [math.exp(w - top) for w in weights])[0] if len(paths) > 1 else 0
        return paths[chosen][1]

    @staticmethod
    def _forward_backward(ends: Lattice, alpha: float, rng: random.Random) -> list[tuple[int, int, int]]:
        # Forward: log of the summed weight exp(alpha * score) of every path to each position.
        forward = [0.0] + [-math.inf] * (len(ends) - 1)
        for end in range(1, len(ends)):
            terms = [forward[start] + alpha * score for start, _, score in ends[end]]
            top = max(terms)
            forward[end] = top + math.log(sum(math.exp(t - top) for t in terms))
        # Backward: from the end, pick the node ending here in proportion to its share of the weight.
        path, end = [], len(ends) - 1
        while end > 0:
            nodes = ends[end]
            weights = [math.exp(forward[start] + alpha * score - forward[end]) for start, _, score in nodes]
            start, token_id, _ = nodes[rng.choices(range(len(nodes)), weights)[0]]
            path.append((start, end, token_id))
            end = start
        return path[::-1]

    @staticmethod
    def _nbest(ends: Lattice, size: int) -> list[tuple[float, list[tuple[int, int, int]]]]:
        # The `size` best (score, path) to each position, extending those of each node's start.
        best: list[list[tuple[float, list[tuple[int, int, int]]]]] = [[(0.0, [])]]
        for end in range(1, len(ends)):
            candidates = [(score + total, [*path, (start, end, token_id)])
                          for start, token_id, score in ends[end] for total, path in best[start]]
            candidates.sort(key=lambda c: -c[0])  # stable: on a tie the earlier start wins, as tokenizers' Viterbi
            best.append(candidates[:size])
        return best[-1]

    def encode(self, piece: str, alpha: float, nbest_size: int, rng: random.Random) -> list[tuple[int, str, tuple[int, int]]]:
        """(id, token, byte span in the piece) of each token of a sampled segmentation."""
        if not piece:
            return []
        spans: list[list[int]] = []  # [start, end, id]; consecutive unknowns fused, as tokenizers does
        for start, end, token_id in self.sample(piece, alpha, nbest_size, rng):
            if token_id < 0 and spans and spans[-1][2] < 0:
                spans[-1][1] = end
            else:
                spans.append([start, end, token_id])
        out: list[Cut] = []
        offset = 0
        for start, end, token_id in spans:
            text = piece[start:end]
            size = len(text.encode("utf-8"))
            span = (offset, offset + size)
            offset += size
            if token_id >= 0:
                out.append((token_id, text, span))
            elif self.byte_fallback and all(f"<0x{b:02X}>" in self.pieces for b in text.encode()):
                out.extend((self.pieces[f"<0x{b:02X}>"][0], f"<0x{b:02X}>", span) for b in text.encode())
            elif self.unk is not None:
                out.append((self.unk, text, span))
            else:  # as tokenizers' Unigram says it
                raise ValueError("Encountered an unknown token but `unk_id` is missing")
        return out


# ---- encoding a whole text --------------------------------------------------------------------

class TokenizersSampler:
    """A version's tokenizer.json with a sampling model in place of its own."""

    def __init__(self, tokenizer_json: str) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_str(tokenizer_json)
        model = json.loads(tokenizer_json)["model"]
        self.kind = model["type"]
        self.bpe = BpeDropout(model) if self.kind == "BPE" else None
        self.unigram = UnigramSampler(model) if self.kind == "Unigram" else None

    def encode(self, text: str, sampling: Sampling) -> Encoded:
        from tokenizers import PreTokenizedString, Token

        bpe, unigram, alpha, nbest_size = self.bpe, self.unigram, sampling.alpha, sampling.nbest_size
        if (sampling.method == "bpe-dropout") != (bpe is not None) or (bpe or unigram) is None:
            raise ValueError(f"a {self.kind} model does not sample with {sampling.method}")
        rng = random.Random(sampling.seed)
        if bpe is not None:
            def cut(piece: str) -> list[Cut]:
                return bpe.encode(piece, sampling.dropout or 0.0, rng)
        elif unigram is not None and alpha is not None and nbest_size is not None:
            def cut(piece: str) -> list[Cut]:
                return unigram.encode(piece, alpha, nbest_size, rng)
        else:
            raise ValueError("unigram sampling needs alpha and nbest_size")
        pre = PreTokenizedString(text)
        if (normalizer := self.tokenizer.normalizer) is not None:
            pre.normalize(normalizer.normalize)
        if (pre_tokenizer := self.tokenizer.pre_tokenizer) is not None:
            pre_tokenizer.pre_tokenize(pre)
        pre.tokenize(lambda piece: [Token(i, token, span) for i, token, span in cut(piece)])
        encoding = pre.to_encoding()
        if (post := self.tokenizer.post_processor) is not None:
            encoding = post.process(encoding, None, False)
        return encoding.ids, encoding.tokens, encoding.offsets


def sampler(tokenizer_json: str | bytes) -> TokenizersSampler:
    """The sampler of a version, from its tokenizer.json."""
    return TokenizersSampler(tokenizer_json if isinstance(tokenizer_json, str) else tokenizer_json.decode("utf-8"))
