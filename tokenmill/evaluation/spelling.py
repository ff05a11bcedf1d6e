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

Deliberately not handled: which tokenizers spell their input (`tokenmill.evaluation.encoders` decides
from each model's normalizer, pre-tokenizer and decoder), and the lines that fail.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit

from tokenmill.corpora.words import code_points, line_lengths, utf8_lines
from tokenmill.evaluation.utf8 import SEQUENCE_BYTES

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
        spelled, spans = _spell_bytes(*utf8_lines(lines), flat, counts, self.blob, self.starts, self.lengths,
                                      self.dummy_prefix)
        return Checked(spelled, spelled, spans)


@njit(cache=True, nogil=True)
def _spell_bytes(data: np.ndarray, line_chars: np.ndarray, flat: np.ndarray, counts: np.ndarray, blob: np.ndarray,
                 starts: np.ndarray, lengths: np.ndarray, dummy_prefix: bool) -> tuple[np.ndarray, np.ndarray]:
    """Line by line, whether the ids' bytes are the line's UTF-8 bytes (after a dummy space, if
    any), and the character span of each token of a spelled line: the characters holding its
    bytes (the pieces of a split character all get it; a lone dummy "▁" gets the first)."""
    spelled = np.zeros(len(counts), dtype=np.bool_)
    spans = np.zeros((len(flat), 2), dtype=np.int64)
    line_start = 0  # of the line's bytes in data
    first_token = 0
    for line in range(len(counts)):
        line_end = line_start
        for _ in range(line_chars[line]):
            line_end += SEQUENCE_BYTES[data[line_end]]
        position, chars, good = line_start, 0, True  # chars: characters begun before position
        for token in range(first_token, first_token + counts[line]):
            token_id = flat[token]
            if token_id >= len(lengths) or lengths[token_id] < 0:
                good = False
                break
            piece, size = starts[token_id], lengths[token_id]
            if dummy_prefix and token == first_token:
                if line_end == line_start or blob[piece] != 0x20:  # no dummy space before an empty line
                    good = False
                    break
                piece, size = piece + 1, size - 1
            if position + size > line_end:
                good = False
                break
            # The character holding the token's first byte: one begun here, or the one before.
            first = chars if position == line_end or data[position] & 0xC0 != 0x80 else chars - 1
            for offset in range(size):
                byte = data[position + offset]
                if byte != blob[piece + offset]:
                    good = False
                    break
                chars += byte & 0xC0 != 0x80
            if not good:
                break
            position += size
            spans[token, 0], spans[token, 1] = first, chars if size else first + 1
        spelled[line] = good and position == line_end
        if not spelled[line]:
            spans[first_token:first_token + counts[line]] = 0
        first_token += counts[line]
        line_start = line_end
    return spelled, spans


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

    glued: np.ndarray = field(kw_only=True)  # bool per id: decoded right after the token before, no space
    continuing: np.ndarray = field(kw_only=True)  # bool per id: a later piece of a word ("##" kept if first in a line)

    @classmethod
    def of_pieces(cls, pieces: Sequence[str | None], glued: Sequence[bool], continuing: Sequence[bool]) -> "WordPieceSpelling":
        """From each id's characters (None: no fixed text), whether the decoder glues it on,
        and whether it is a continuing piece."""
        lengths, starts = _layout(pieces)
        return cls(code_points("".join(piece for piece in pieces if piece)), starts, lengths, False,
                   glued=np.array(glued, dtype=bool), continuing=np.array(continuing, dtype=bool))

    def check(self, lines: Sequence[str], flat: np.ndarray, counts: np.ndarray) -> Checked:
        """Which lines their ids spell (whitespace aside), which of those decode back to
        themselves, and the spans of their tokens."""
        return Checked(*_spell_words(code_points("".join(lines)), line_lengths(lines), flat, counts, self.blob,
                                     self.starts, self.lengths, self.glued, self.continuing, _WHITE_SPACE))


@njit(cache=True, nogil=True)
def _spell_words(codes: np.ndarray, line_chars: np.ndarray, flat: np.ndarray, counts: np.ndarray, blob: np.ndarray,
                 starts: np.ndarray, lengths: np.ndarray, glued: np.ndarray, continuing: np.ndarray,
                 white_space: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Line by line, whether the ids' characters are the line's characters other than whitespace
    (each token's without whitespace inside), whether the line decodes back to itself, and each
    token's span. A line decodes back when it has no whitespace at either end and, between
    tokens, exactly the decoder's: nothing before a glued token, one space before any other."""
    spelled = np.zeros(len(counts), dtype=np.bool_)
    roundtrips = np.zeros(len(counts), dtype=np.bool_)
    spans = np.zeros((len(flat), 2), dtype=np.int64)
    last_white = len(white_space) - 1
    line_start = 0  # of the line in codes
    first_token = 0
    for line in range(len(counts)):
        size = line_chars[line]
        position, good, back = 0, True, True  # position in the line
        for token in range(first_token, first_token + counts[line]):
            token_id = flat[token]
            if token_id >= len(lengths) or lengths[token_id] < 0:
                good = False
                break
            before = position
            while position < size and white_space[min(codes[line_start + position], last_white)]:
                position += 1
            piece, width = starts[token_id], lengths[token_id]
            if position + width > size:
                good = False
                break
            for offset in range(width):
                if codes[line_start + position + offset] != blob[piece + offset]:
                    good = False
                    break
            if not good:
                break
            if token == first_token:
                back &= position == 0 and not continuing[token_id]
            elif glued[token_id]:
                back &= position == before
            else:
                back &= position == before + 1 and codes[line_start + before] == 0x20
            spans[token, 0], spans[token, 1] = position, position + width
            position += width
        back &= position == size and (counts[line] > 0 or size == 0)
        while good and position < size and white_space[min(codes[line_start + position], last_white)]:
            position += 1
        spelled[line] = good and position == size
        roundtrips[line] = spelled[line] and back
        if not spelled[line]:
            spans[first_token:first_token + counts[line]] = 0
        first_token += counts[line]
        line_start += size
    return spelled, roundtrips, spans


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
    if (codes is not None and widths is None) or (len(points) and int(points.max()) < 0x80):
        first, last = starts, ends  # ASCII: bytes are characters
    else:
        widths = utf8_widths(points) if widths is None else widths
        char_of_byte = np.append(np.repeat(np.arange(len(points), dtype=np.int64), widths), len(points))
        first, last = char_of_byte[starts], char_of_byte[np.maximum(ends - 1, starts)] + (lengths > 0)
    line_start = np.repeat(np.concatenate(([0], np.cumsum([len(line) for line in lines])[:-1])), counts)
    return np.stack([first - line_start, last - line_start], axis=1)
