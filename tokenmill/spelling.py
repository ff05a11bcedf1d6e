"""Spelling: token ids that stand for fixed text, checked against the lines they encode.

tiktoken's byte-level ranks, sentencepiece models and tokenizer.json models with a "▁"
metaspace spell their input: every id stands for fixed bytes ("▁" for a space, "<0xAB>"
for one byte), and a line's tokens, end to end, are the line, after a dummy space in front
for the metaspace kinds (`Spelling`). WordPiece tokens spell the line's characters other
than whitespace, a word's later pieces after their "##" (`WordPieceSpelling`).

`check` proves this for every line of a batch at once by gathering the ids' bytes (or
characters) and comparing them with the text. A line that passes needs no per-token
offsets: each token covers the characters holding what it spells. Nor does it need a
decode: a spelled line decodes back to itself, or for WordPiece does exactly when the
spaces the decoder puts between words are the line's own. Lines that fail (an unknown
token, a literal "▁", a special token) are left to the engine's own exact path.

Deliberately not handled: which tokenizers spell their input (`tokenmill.encoders` decides
from each model's normalizer, pre-tokenizer and decoder), and the lines that fail.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import numpy as np

from tokenmill.words import JoinedLines, code_points

NO_BYTES = -1  # the length of an id that stands for no fixed text (unknown, control, special)


class Checked(NamedTuple):
    """What `check` found, line by line: spelled, decodes back to itself (only spelled lines
    can), and the (n, 2) character spans of the spelled lines' tokens (zeros elsewhere)."""

    spelled: np.ndarray
    roundtrips: np.ndarray
    spans: np.ndarray


@dataclass(frozen=True)
class Spelling:
    """The bytes each id stands for, end to end in `blob`."""

    blob: np.ndarray  # uint8 (code points, uint32, for WordPiece)
    starts: np.ndarray  # where each id's bytes start in blob
    lengths: np.ndarray  # how many bytes each id stands for, or NO_BYTES
    dummy_prefix: bool = False  # a non-empty line is spelled with a space in front that stands for nothing

    @classmethod
    def of(cls, pieces: Sequence[bytes | None], dummy_prefix: bool = False) -> "Spelling":
        """From each id's bytes, None (or empty) where an id stands for no fixed bytes."""
        lengths, starts = _layout(pieces)
        return cls(np.frombuffer(b"".join(piece for piece in pieces if piece), dtype=np.uint8), starts, lengths, dummy_prefix)

    def check(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray) -> Checked:
        """Which lines their ids spell exactly, which of those decode back to themselves, and the
        spans of their tokens."""
        text = _Text(lines)
        inside = flat < len(self.lengths)
        lengths = self.lengths[flat] if inside.all() else np.where(inside, self.lengths[np.where(inside, flat, 0)], NO_BYTES)
        ends = np.cumsum(counts)
        running = np.concatenate(([0], np.cumsum(lengths)))
        expected = self._expected(text)
        spelled = running[ends] - running[ends - counts] == expected
        if (lengths < 0).any():
            spelled &= np.bincount(np.repeat(np.arange(len(lines)), counts)[lengths < 0], minlength=len(lines)) == 0
        if not spelled.all():
            return self._check_candidates(lines, flat, counts, spelled)
        got = self.blob[np.repeat(self.starts[flat] - running[:-1], lengths) + np.arange(int(running[-1]))]
        differ = np.flatnonzero(got != self._wanted(text))
        if len(differ):
            # Rare: the counts agree but some units differ; those lines are out, the rest proven.
            spelled[np.repeat(np.arange(len(lines)), expected)[differ]] = False
            return self._check_candidates(lines, flat, counts, spelled)
        return self._read(text, flat, lengths, counts)

    def _expected(self, text: "_Text") -> np.ndarray:
        """How many units (bytes here) each line's ids must spell."""
        return text.line_bytes + (self.dummy_prefix & (text.lengths > 0))

    def _wanted(self, text: "_Text") -> np.ndarray:
        """The units the ids of the lines must spell, end to end."""
        if self.dummy_prefix:
            data = "".join(" " + line for line in text.lines if line).encode("utf-8", "surrogatepass")
        else:
            data = text.text.encode("utf-8", "surrogatepass")
        return np.frombuffer(data, dtype=np.uint8)

    def _read(self, text: "_Text", flat: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> Checked:
        """Round trips and spans of lines all spelled."""
        if self.dummy_prefix:
            dummies = (np.cumsum(counts) - counts)[counts > 0]  # the first token of every non-empty line
            lengths = lengths.copy()
            lengths[dummies] -= 1  # the dummy space in front of every line stands for no input byte
        spans = byte_length_spans(text.lines, lengths, counts, text.codes, text.widths)
        if self.dummy_prefix:
            # A lone dummy "▁" belongs to the first word, as tokenizer.json's offsets have it.
            lone = dummies[lengths[dummies] == 0]
            spans[lone, 1] = spans[lone, 0] + 1
        every = np.ones(len(text.lines), dtype=bool)
        return Checked(every, every, spans)

    def _check_candidates(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray,
                          candidates: np.ndarray) -> Checked:
        """`check` where only the candidate lines can be spelled: those are checked as a batch."""
        spelled, roundtrips = np.zeros(len(lines), dtype=bool), np.zeros(len(lines), dtype=bool)
        spans = np.zeros((len(flat), 2), dtype=np.int64)
        if candidates.any():
            keep = np.repeat(candidates, counts)
            chosen = np.flatnonzero(candidates)
            spelled[chosen], roundtrips[chosen], spans[keep] = self.check(
                [lines[i] for i in chosen.tolist()], flat[keep], counts[chosen])
        return Checked(spelled, roundtrips, spans)

def _layout(pieces: Sequence[bytes | str | None]) -> tuple[np.ndarray, np.ndarray]:
    """Each piece's length (NO_BYTES for None or empty) and where it starts when the pieces are
    laid end to end."""
    lengths = np.array([NO_BYTES if not piece else len(piece) for piece in pieces], dtype=np.int64)
    sizes = np.maximum(lengths, 0)
    return lengths, np.cumsum(sizes) - sizes


# Unicode White_Space, which `tokenizers`' whitespace pre-tokenizers drop (Whitespace's
# regex, WhitespaceSplit's and BertPreTokenizer's char::is_whitespace); all below U+3001.
_WHITE_SPACE = np.zeros(0x3002, dtype=bool)
for _first, _last in ((0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                      (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000)):
    _WHITE_SPACE[_first:_last + 1] = True


@dataclass(frozen=True)
class WordPieceSpelling(Spelling):
    """WordPiece ids: the characters each stands for (without "##"), and how the decoder
    joins it to the token before: glued (continuing pieces, and those the decoder's cleanup
    glues on, such as "." or "'s") or after a space."""

    glued: np.ndarray = None  # bool per id: decoded right after the token before, no space
    continuing: np.ndarray = None  # bool per id: a later piece of a word ("##" kept if first in a line)

    @classmethod
    def of_pieces(cls, pieces: Sequence[str | None], glued: Sequence[bool], continuing: Sequence[bool]) -> "WordPieceSpelling":
        """From each id's characters (None: no fixed text), whether the decoder glues it on,
        and whether it is a continuing piece."""
        lengths, starts = _layout(pieces)
        return cls(code_points("".join(piece for piece in pieces if piece)), starts, lengths, False,
                   np.array(glued, dtype=bool), np.array(continuing, dtype=bool))

    def _expected(self, text: "_Text") -> np.ndarray:
        return text.line_kept

    def _wanted(self, text: "_Text") -> np.ndarray:
        return text.codes[text.kept]

    def _read(self, text: "_Text", flat: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> Checked:
        """Spans from where each token's characters sit among the characters kept; a line
        decodes back to itself when it has no whitespace at either end and, between tokens,
        exactly the decoder's: nothing before a glued token, one space before any other."""
        size = len(text.lines)
        running = np.cumsum(lengths)
        first = text.kept[running - lengths]
        last = text.kept[running - 1] + 1
        line_start = np.repeat(text.starts, counts)
        spans = np.stack([first - line_start, last - line_start], axis=1)
        line_of = np.repeat(np.arange(size), counts)
        gap = first[1:] - last[:-1]
        joined = np.where(self.glued[flat[1:]], gap == 0, (gap == 1) & (text.codes[np.minimum(last[:-1], len(text.codes) - 1)] == 0x20))
        line_first = np.ones(len(flat), dtype=bool)
        line_first[1:] = line_of[1:] != line_of[:-1]
        good = np.ones(len(flat), dtype=bool)
        good[1:] = joined
        good[line_first] = (spans[line_first, 0] == 0) & ~self.continuing[flat[line_first]]
        line_last = np.ones(len(flat), dtype=bool)
        line_last[:-1] = line_first[1:]
        good[line_last] &= spans[line_last, 1] == text.lengths[line_of[line_last]]
        roundtrips = (np.bincount(line_of[~good], minlength=size) == 0) & ((counts > 0) | (text.lengths == 0))
        return Checked(np.ones(size, dtype=bool), roundtrips, spans)


class _Text(JoinedLines):
    """A batch of lines end to end, with what the spellings compare: UTF-8 widths (None if all
    ASCII) and bytes per line; for WordPiece, the characters other than whitespace."""

    @cached_property
    def widths(self) -> np.ndarray | None:
        return None if not len(self.codes) or int(self.codes.max()) < 0x80 else utf8_widths(self.codes)

    @cached_property
    def line_bytes(self) -> np.ndarray:
        return self.lengths if self.widths is None else self._per_line(self.widths)

    @cached_property
    def _kept(self) -> np.ndarray:
        return ~_WHITE_SPACE[np.minimum(self.codes, len(_WHITE_SPACE) - 1)]

    @cached_property
    def kept(self) -> np.ndarray:
        """Positions of the characters other than whitespace."""
        return np.flatnonzero(self._kept)

    @cached_property
    def line_kept(self) -> np.ndarray:
        """How many characters other than whitespace each line has."""
        return self._per_line(self._kept)

    def _per_line(self, values: np.ndarray) -> np.ndarray:
        """The sum of a value per character over each line."""
        running = np.concatenate(([0], np.cumsum(values, dtype=np.int64)))
        return running[self.starts + self.lengths] - running[self.starts]


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
