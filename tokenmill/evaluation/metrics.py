"""The evaluation metrics of DESIGN §6 for one (tokenizer, corpus) pair, fed line by line.

Callers encode each line without special tokens and pass the ids, each token's character
span in the line and whether the line decodes back to itself; `MetricsAccumulator`
turns that into the stored numbers. Words are counted by `tokenmill.corpora.words`, and the
rule it applied is reported next to them. `premium` compares two corpora of a parallel
group once each has its token count.

Deliberately not handled: encoding and decoding (both libraries' encoders feed this),
choosing the pivot of a parallel group, and storing results. Lines arrive without their
newline; a line that is empty still counts for the round trip rate.
"""

from __future__ import annotations

import io
import itertools
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from numba import njit

from tokenmill.corpora.words import code_points, line_lengths, scan_words, word_rule
from tokenmill.evaluation.token_counts import pack_counts

#: The order of the Rényi entropy, as Zouhar et al. (2023) recommend for efficiency.
RENYI_ALPHA = 2.5

# Lines are buffered and measured in numpy batches of about this many tokens (plus a
# quarter of the characters), which keeps per-token work out of Python and the buffers
# at a few megabytes.
_BATCH_SIZE = 1 << 17


class MetricsAccumulator:
    """Streaming sums of the §6 metrics of one tokenizer on one corpus."""

    _batch: list[str]  # lines, measured together by _flush (add_batch's, while they are measured)

    def __init__(
        self,
        vocab_size: int,
        unk_id: int | None = None,
        byte_fallback_ids: frozenset[int] = frozenset(),
    ) -> None:
        if vocab_size < 0:
            raise ValueError(f"vocab_size must be >= 0, got {vocab_size}")
        self.vocab_size = vocab_size
        self.unk_id = unk_id
        self.byte_fallback_ids = frozenset(byte_fallback_ids)
        self._counts = np.zeros(vocab_size, dtype=np.int64)  # occurrences per id
        self._beyond: Counter[int] = Counter()  # ids >= vocab_size: added tokens, kept apart
        self._lines = self._roundtrips = self._words = self._continued = 0
        self._characters = self._bytes = 0
        self._saw_no_space = False
        # Per document (line): sums of squares and products of tokens t, words w and characters c,
        # for the 95% intervals of the ratios over documents (`intervals`).
        self._moments = np.zeros(len(MOMENTS), dtype=np.float64)
        self._clear_batch()

    def add(
        self,
        line: str,
        ids: Sequence[int],
        spans: Sequence[tuple[int, int]],
        roundtrip_ok: bool,
    ) -> None:
        """Account for one line, its token ids, their [start, end) spans and its round trip."""
        if len(spans) != len(ids):
            raise ValueError(f"{len(ids)} token ids but {len(spans)} spans")
        if len(ids) and min(ids) < 0:
            raise ValueError(f"token ids must be >= 0, got {min(ids)}")
        self._lines += 1
        self._roundtrips += bool(roundtrip_ok)
        self._characters += len(line)
        self._batch.append(line)
        self._batch_size += len(ids) + len(line) // 4
        self._ids.extend(ids)
        self._token_spans.extend(spans)
        self._line_tokens.append(len(ids))
        if self._batch_size >= _BATCH_SIZE:
            self._flush()

    def add_batch(
        self,
        lines: Sequence[str],
        ids: np.ndarray,
        spans: np.ndarray,
        line_tokens: np.ndarray,
        roundtrips: int,
    ) -> None:
        """Account for many lines at once: flat ids, (n, 2) spans, tokens per line, lines that round-trip."""
        if len(spans) != len(ids) or int(np.sum(line_tokens)) != len(ids) or len(line_tokens) != len(lines):
            raise ValueError("ids, spans, line_tokens and lines do not agree in size")
        if len(ids) and int(ids.min()) < 0:
            raise ValueError(f"token ids must be >= 0, got {int(ids.min())}")
        self._flush()
        batch = _BatchText(lines)
        self._lines += len(lines)
        self._characters += int(batch.lengths.sum())
        self._roundtrips += roundtrips
        self._batch = list(lines)
        self._measure(np.asarray(ids, dtype=np.int64), np.asarray(spans, dtype=np.int64).reshape(-1, 2),
                      np.asarray(line_tokens, dtype=np.int64), batch)

    def merge(self, other: MetricsAccumulator) -> None:
        """Fold in the sums of an accumulator that measured other lines of the same corpus."""
        self._flush()
        other._flush()
        self._counts += other._counts
        self._beyond.update(other._beyond)
        self._lines += other._lines
        self._roundtrips += other._roundtrips
        self._words += other._words
        self._continued += other._continued
        self._characters += other._characters
        self._bytes += other._bytes
        self._moments += other._moments
        self._saw_no_space = self._saw_no_space or other._saw_no_space

    def to_bytes(self) -> bytes:
        """The sums, for another process to merge (`from_bytes`): an npz of plain arrays, no pickle."""
        self._flush()
        scalars = np.array([self._lines, self._roundtrips, self._words, self._continued, self._characters, self._bytes,
                            int(self._saw_no_space)], dtype=np.int64)
        beyond = np.array(sorted(self._beyond.items()), dtype=np.int64).reshape(-1, 2)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, counts=self._counts, beyond=beyond, moments=self._moments, scalars=scalars)
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, vocab_size: int, unk_id: int | None = None,
                   byte_fallback_ids: frozenset[int] = frozenset()) -> MetricsAccumulator:
        """The accumulator whose sums `to_bytes` wrote, for a tokenizer of `vocab_size` ids."""
        accumulator = cls(vocab_size, unk_id, byte_fallback_ids)
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            counts, beyond, moments, scalars = (arrays[name] for name in ("counts", "beyond", "moments", "scalars"))
        if counts.shape != (vocab_size,) or moments.shape != (len(MOMENTS),) or scalars.shape != (7,):
            raise ValueError(f"these sums are not those of a tokenizer of {vocab_size} ids")
        accumulator._counts = counts.astype(np.int64)
        accumulator._beyond = Counter(dict(zip(beyond[:, 0].tolist(), beyond[:, 1].tolist(), strict=True)))
        accumulator._moments = moments.astype(np.float64)
        (accumulator._lines, accumulator._roundtrips, accumulator._words, accumulator._continued,
         accumulator._characters, accumulator._bytes, saw_no_space) = scalars.tolist()
        accumulator._saw_no_space = bool(saw_no_space)
        return accumulator

    def result(self) -> dict[str, float | int | str]:
        """Return the §6 metrics of everything added so far; empty input gives zeros."""
        self._flush()
        tokens = int(self._counts.sum()) + sum(self._beyond.values())
        counts = np.concatenate(
            [self._counts, np.fromiter(self._beyond.values(), dtype=np.int64)]
        )
        shannon, renyi = _entropies(counts)
        log_vocab = float(np.log(self.vocab_size)) if self.vocab_size > 1 else 0.0
        unk = self._occurrences([] if self.unk_id is None else [self.unk_id])
        # Not a §6 number: each id's count clipped at 3, for the cost report's ghost tokens
        # (tokenmill.evaluation.token_counts); left out when even packed it would be too large to store.
        packed = pack_counts(self._counts)
        return {
            "tokens": tokens,
            "words": self._words,
            "characters": self._characters,
            "bytes": self._bytes,
            "fertility": _ratio(tokens, self._words),
            "chars_per_token": _ratio(self._characters, tokens),
            "bytes_per_token": _ratio(self._bytes, tokens),
            "continued_word_rate": _ratio(self._continued, self._words),
            "unk_rate": _ratio(unk, tokens),
            "byte_fallback_rate": _ratio(self._occurrences(self.byte_fallback_ids), tokens),
            "roundtrip_rate": _ratio(self._roundtrips, self._lines),
            # Only ids inside the vocabulary count, so utilization never exceeds 1.
            "vocab_utilization": _ratio(int(np.count_nonzero(self._counts)), self.vocab_size),
            "shannon_efficiency": _ratio(shannon, log_vocab),
            "renyi_efficiency": _ratio(renyi, log_vocab),
            "word_rule": word_rule(self._saw_no_space),
            **intervals(self._moments),
            **({"token_counts": packed} if packed else {}),
        }

    def _occurrences(self, ids: Iterable[int]) -> int:
        """Return how many tokens had one of `ids`."""
        total = 0
        for token_id in ids:
            if 0 <= token_id < self.vocab_size:
                total += int(self._counts[token_id])
            else:
                total += self._beyond[token_id]
        return total

    def _clear_batch(self) -> None:
        self._batch = []
        self._batch_size = 0  # tokens plus a quarter of the characters
        self._ids: list[int] = []
        self._token_spans: list[tuple[int, int]] = []
        self._line_tokens: list[int] = []  # tokens per line

    def _flush(self) -> None:
        """Measure the buffered lines in numpy and fold them into the totals."""
        if not self._batch:
            return
        self._measure(np.asarray(self._ids, dtype=np.int64), _as_spans(self._token_spans),
                      np.asarray(self._line_tokens, dtype=np.int64), _BatchText(self._batch))

    def _measure(self, ids: np.ndarray, tokens: np.ndarray, line_tokens: np.ndarray, batch: _BatchText) -> None:
        self._count_ids(ids)
        self._bytes += len(batch.text.encode("utf-8", "surrogatepass")) - (len(self._batch) - 1)
        # Lines are apart in the batch text: a newline joins them.
        words, saw_no_space = scan_words(batch.codes)
        self._saw_no_space |= saw_no_space
        self._words += len(words)
        line_words = np.bincount(np.searchsorted(batch.starts, words[:, 0], side="right") - 1,
                                 minlength=len(line_tokens)) if len(words) else np.zeros(len(line_tokens), np.int64)
        self._moments += document_moments(line_tokens, line_words, batch.lengths)
        self._continued += continued_words(words, tokens, line_tokens, batch.starts, batch.lengths)
        self._clear_batch()

    def _count_ids(self, ids: np.ndarray) -> None:
        """Add a batch of ids to the per-id counts."""
        if _count_inside(ids, self._counts):
            # A counter, not bigger counts: one stray huge id must not allocate gigabytes.
            beyond, counts = np.unique(ids[ids >= self.vocab_size], return_counts=True)
            self._beyond.update(dict(zip(beyond.tolist(), counts.tolist())))


# What `document_moments` sums over documents: their number, then t, w, c and their products.
MOMENTS = ("n", "t", "w", "c", "tt", "ww", "cc", "tw", "tc")
Z95 = 1.959963984540054


def document_moments(tokens: np.ndarray, words: np.ndarray, characters: np.ndarray) -> np.ndarray:
    """The MOMENTS of a batch of documents' tokens, words and characters."""
    t, w, c = (np.asarray(a, dtype=np.float64) for a in (tokens, words, characters))
    return np.array([len(t), t.sum(), w.sum(), c.sum(), (t * t).sum(), (w * w).sum(), (c * c).sum(),
                     (t * w).sum(), (t * c).sum()])


def intervals(moments: np.ndarray) -> dict[str, float | int]:
    """Half-widths of the 95% intervals of fertility (t/w) and characters per token (c/t) over the
    documents, read as a sample of documents (the ratio estimator's delta-method variance:
    n/(n-1) · Σ(a - R·b)² / (Σb)²), and how many documents they rest on."""
    n, t, w, c, tt, ww, cc, tw, tc = (float(x) for x in moments)
    out: dict[str, float | int] = {"documents": int(n)}
    for name, (a, b, aa, bb, ab) in {"fertility": (t, w, tt, ww, tw), "chars_per_token": (c, t, cc, tt, tc)}.items():
        if n < 2 or b <= 0:
            out[f"{name}_ci95"] = 0.0
            continue
        ratio = a / b
        residuals = max(0.0, aa - 2 * ratio * ab + ratio * ratio * bb)
        out[f"{name}_ci95"] = Z95 * float(np.sqrt(n / (n - 1) * residuals)) / b
    return out


@njit(cache=True, nogil=True)
def _count_inside(ids: np.ndarray, counts: np.ndarray) -> int:
    """Add each id in 0..len(counts) - 1 to its count; return how many were not."""
    beyond = 0
    for token in ids:
        if 0 <= token < len(counts):
            counts[token] += 1
        else:
            beyond += 1
    return beyond


class _BatchText:
    """Lines as one text joined by newlines, its code points, and each line's length and start
    in it: a line's spans shift by where it starts, and the newline keeps one line's spans from
    touching the next's."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.text = "\n".join(lines)
        self.codes = code_points(self.text)
        self.lengths = line_lengths(lines)
        self.starts = np.cumsum(self.lengths + 1) - (self.lengths + 1)


@njit(cache=True, nogil=True)
def continued_words(words: np.ndarray, spans: np.ndarray, line_tokens: np.ndarray, starts: np.ndarray,
                    lengths: np.ndarray) -> int:
    """Count the words that two or more tokens overlap. Words are (n, 2) [start, end) spans in a
    text of lines that start at `starts`; tokens are spans in their line (clipped to it), line
    after line, `line_tokens` per line."""
    if len(words) == 0 or len(spans) == 0:
        return 0
    # A token [s, e) overlaps a word [ws, we) when s < we and e > ws. Words are sorted and
    # disjoint, so the words one token overlaps are the contiguous indices first..last:
    # first = words ending at or before s, last = words starting before e, minus one.
    size = max(words[-1, 1], starts[-1] + lengths[-1]) + 2
    ends_upto = np.zeros(size, dtype=np.int64)
    starts_before = np.zeros(size, dtype=np.int64)
    for w in range(len(words)):
        ends_upto[words[w, 1]] += 1
        starts_before[words[w, 0] + 1] += 1
    for position in range(1, size):
        ends_upto[position] += ends_upto[position - 1]
        starts_before[position] += starts_before[position - 1]
    # +1 where a token's run of words opens and -1 after it closes; the running sum is the
    # number of tokens over each word.
    delta = np.zeros(len(words) + 1, dtype=np.int64)
    token = 0
    for line in range(len(line_tokens)):
        for _ in range(line_tokens[line]):
            start = starts[line] + min(max(spans[token, 0], 0), lengths[line])
            end = starts[line] + min(max(spans[token, 1], 0), lengths[line])
            first, last = ends_upto[start], starts_before[end] - 1
            if first <= last:
                delta[first] += 1
                delta[last + 1] -= 1
            token += 1
    continued = running = 0
    for w in range(len(words)):
        running += delta[w]
        continued += running >= 2
    return continued


def _as_spans(pairs: list[tuple[int, int]]) -> np.ndarray:
    """Return a list of (start, end) pairs as an (n, 2) int64 array."""
    # fromiter over the flattened pairs is ~5x faster than np.asarray on a list of tuples.
    flat = itertools.chain.from_iterable(pairs)
    return np.fromiter(flat, dtype=np.int64, count=2 * len(pairs)).reshape(-1, 2)


def _entropies(counts: np.ndarray) -> tuple[float, float]:
    """Return the Shannon and Rényi (RENYI_ALPHA) entropies in nats of a count vector."""
    total = counts.sum()
    if total == 0:
        return 0.0, 0.0
    p = counts[counts > 0] / total
    shannon = float(-(p * np.log(p)).sum())
    renyi = float(np.log((p**RENYI_ALPHA).sum()) / (1.0 - RENYI_ALPHA))
    # "+ 0.0" turns the -0.0 of a one-token distribution into 0.0.
    return shannon + 0.0, renyi + 0.0


def _ratio(numerator: float, denominator: float) -> float:
    """Return numerator / denominator, or 0.0 when the denominator is 0."""
    return numerator / denominator if denominator else 0.0
