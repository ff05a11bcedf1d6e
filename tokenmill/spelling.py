"""Spelling: token ids that stand for fixed bytes, checked against the lines they encode.

tiktoken's byte-level ranks, sentencepiece models and tokenizer.json models with a "▁"
metaspace spell their input: every id stands for fixed bytes ("▁" for a space, "<0xAB>"
for one byte), and a line's tokens, end to end, are the line, after a dummy space in front
for the metaspace kinds. `Spelling.check` proves this for every line of a batch at once by
gathering the ids' bytes and comparing them with the text. A line that passes decodes back
to itself, and each of its tokens covers the characters holding its bytes, so it needs
neither a decode nor per-token offsets. Lines that fail (an unknown token, a literal "▁",
a special token) are left to the engine's own exact path.

Deliberately not handled: which tokenizers spell their input (`tokenmill.encoders` decides
from each model's normalizer, pre-tokenizer and decoder), and the lines that fail.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tokenmill.words import code_points

NO_BYTES = -1  # the length of an id that stands for no fixed bytes (unknown, control, special)


@dataclass(frozen=True)
class Spelling:
    """The bytes each id stands for, end to end in `blob`."""

    blob: np.ndarray  # uint8
    starts: np.ndarray  # where each id's bytes start in blob
    lengths: np.ndarray  # how many bytes each id stands for, or NO_BYTES
    dummy_prefix: bool  # a non-empty line is spelled with a space in front that stands for nothing

    @classmethod
    def of(cls, pieces: Sequence[bytes | None], dummy_prefix: bool = False) -> "Spelling":
        """From each id's bytes, None where an id stands for no fixed bytes."""
        lengths = np.array([NO_BYTES if piece is None else len(piece) for piece in pieces], dtype=np.int64)
        blob = np.frombuffer(b"".join(piece for piece in pieces if piece is not None), dtype=np.uint8)
        sizes = np.maximum(lengths, 0)
        return cls(blob, np.cumsum(sizes) - sizes, lengths, dummy_prefix)

    def check(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which lines their ids spell exactly, and the (n, 2) character spans of those lines'
        tokens (zeros for the tokens of the other lines)."""
        text = _Text(lines)
        inside = flat < len(self.lengths)
        lengths = self.lengths[flat] if inside.all() else np.where(inside, self.lengths[np.where(inside, flat, 0)], NO_BYTES)
        ends = np.cumsum(counts)
        running = np.concatenate(([0], np.cumsum(lengths)))
        dummies = ends[counts > 0] - counts[counts > 0]  # the first token of every non-empty line
        expected = text.line_bytes + (self.dummy_prefix & (counts > 0))
        spelled = running[ends] - running[ends - counts] == expected
        if (lengths < 0).any():
            spelled &= np.bincount(np.repeat(np.arange(len(lines)), counts)[lengths < 0], minlength=len(lines)) == 0
        if not spelled.all():
            return self._check_candidates(lines, flat, counts, spelled)
        if not self._same_bytes(flat, lengths, running, text.spelled(self.dummy_prefix)):
            return self._check_halves(lines, flat, counts)
        if self.dummy_prefix:
            lengths = lengths.copy()
            lengths[dummies] -= 1  # the dummy space in front of every line stands for no input byte
        spans = byte_length_spans(lines, lengths, counts, text.codes, text.widths)
        if self.dummy_prefix:
            # A lone dummy "▁" belongs to the first word, as tokenizer.json's offsets have it.
            lone = dummies[lengths[dummies] == 0]
            spans[lone, 1] = spans[lone, 0] + 1
        return spelled, spans

    def _check_candidates(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray,
                          candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`check` where only the candidate lines can be spelled: those are checked as a batch."""
        spelled = np.zeros(len(lines), dtype=bool)
        spans = np.zeros((len(flat), 2), dtype=np.int64)
        if candidates.any():
            keep = np.repeat(candidates, counts)
            chosen = np.flatnonzero(candidates)
            spelled[chosen], spans[keep] = self.check([lines[i] for i in chosen.tolist()], flat[keep], counts[chosen])
        return spelled, spans

    def _check_halves(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """`check` where the byte counts agree but some bytes differ (rare): halve until found."""
        if len(lines) == 1:
            return np.zeros(1, dtype=bool), np.zeros((len(flat), 2), dtype=np.int64)
        half = len(lines) // 2
        cut = int(counts[:half].sum())
        first, second = self.check(lines[:half], flat[:cut], counts[:half]), self.check(lines[half:], flat[cut:], counts[half:])
        return np.concatenate([first[0], second[0]]), np.concatenate([first[1], second[1]])

    def _same_bytes(self, flat: np.ndarray, lengths: np.ndarray, running: np.ndarray, wanted: bytes) -> bool:
        """Whether the ids' bytes, end to end, are `wanted` (of the same length)."""
        got = self.blob[np.repeat(self.starts[flat] - running[:-1], lengths) + np.arange(len(wanted))]
        return bool((got == np.frombuffer(wanted, dtype=np.uint8)).all())


class _Text:
    """A batch of lines end to end: code points, UTF-8 widths (None if all ASCII), bytes per line."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = lines
        self.joined = "".join(lines)
        self.codes = code_points(self.joined)
        chars = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        if not len(self.codes) or int(self.codes.max()) < 0x80:
            self.widths, self.line_bytes = None, chars
        else:
            self.widths = utf8_widths(self.codes)
            running = np.concatenate(([0], np.cumsum(self.widths)))
            ends = np.cumsum(chars)
            self.line_bytes = running[ends] - running[ends - chars]

    def spelled(self, dummy_prefix: bool) -> bytes:
        """The bytes the ids of the lines must spell."""
        if dummy_prefix:
            return "".join(" " + line for line in self.lines if line).encode("utf-8", "surrogatepass")
        return self.joined.encode("utf-8", "surrogatepass")


def utf8_widths(codes: np.ndarray) -> np.ndarray:
    """How many UTF-8 bytes each code point takes."""
    return (codes >= 0x80).view(np.uint8) + (codes >= 0x800).view(np.uint8) + (codes >= 0x10000).view(np.uint8) + np.uint8(1)


def byte_length_spans(lines: Sequence[str], lengths: np.ndarray, counts: np.ndarray,
                      codes: np.ndarray | None = None, widths: np.ndarray | None = None) -> np.ndarray:
    """Character spans of tokens given each token's byte length, for engines that give no offsets.

    The tokens of a batch cover its lines' bytes end to end, so one cumulative sum gives every
    token's byte range in the concatenated text; each range is then mapped to the characters
    holding it (the pieces of a split character all get that character, as in `tokenizers`).
    `codes` are the code points of the lines end to end and `widths` their UTF-8 widths (None
    with codes: all ASCII), if the caller has them.
    """
    if not len(lengths):
        return np.zeros((0, 2), np.int64)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    points = code_points("".join(lines)) if codes is None else codes
    if codes is not None and widths is None or len(points) and int(points.max()) < 0x80:
        first, last = starts, ends  # ASCII: bytes are characters
    else:
        widths = utf8_widths(points) if widths is None else widths
        char_of_byte = np.append(np.repeat(np.arange(len(points), dtype=np.int64), widths), len(points))
        first, last = char_of_byte[starts], char_of_byte[np.maximum(ends - 1, starts)] + (lengths > 0)
    line_start = np.repeat(np.concatenate(([0], np.cumsum([len(line) for line in lines])[:-1])), counts)
    return np.stack([first - line_start, last - line_start], axis=1)
