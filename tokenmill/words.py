"""Word counting that is fair across scripts, the denominator of fertility (DESIGN §6).

A word is a run of non-whitespace characters, as ``str.split()`` cuts them, except in
the scripts written without spaces (``NO_SPACE_SCRIPTS``), where every character is a
word of its own: "東京は big city" is five words, "abc東京" is three.

Three refinements keep the per-character rule honest, all decided here once:

- a "character" is a base character with the combining marks that follow it, so the
  Thai "ที่" (a consonant and two marks) is one word, not three;
- a character is of a no-space script if it is a letter, mark or digit whose Unicode
  Script is one of them, or whose Script_Extensions name one and not Latin: the
  prolonged sound mark "ー" and "〆" count; CJK punctuation ("。", "「"), the modifier
  apostrophe "ʼ" and the combining tilde of a decomposed "ñ" do not;
- punctuation and symbols touching a no-space character join its word instead of making
  one, as the full stop in "city." does: "東京。" is two words, like "Tokyo." is one.

Deliberately not handled: dictionary word segmentation (Thai or Japanese words are not
found, characters are counted), grapheme clusters beyond "base + marks" (emoji ZWJ
sequences), and normalisation; callers pass the text exactly as it is encoded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

#: Scripts written without spaces between words. Bopomofo annotates Chinese and Yi is
#: written like it, so both are in; Hangul is not, Korean separates words. Rarer
#: scripta continua (Javanese, Balinese, Tai Tham …) are left out until a corpus needs
#: them; tests/unit/test_words.py regenerates the table below for a new list.
NO_SPACE_SCRIPTS: tuple[str, ...] = (
    "Han",
    "Hiragana",
    "Katakana",
    "Bopomofo",
    "Yi",
    "Thai",
    "Lao",
    "Khmer",
    "Myanmar",
    "Tibetan",
)

WHITESPACE = "whitespace"
PER_CHARACTER = "whitespace+per-character"

# Letters, marks and digits of NO_SPACE_SCRIPTS as inclusive code point ranges, Unicode 17
# (the `regex` package's \p{Script}/\p{Script_Extensions}); gaps of unassigned code points
# are bridged so the table stays short. A test checks it against `regex`; a stdlib `re`
# character class built from it scans several times faster than the \p{...} pattern.
NO_SPACE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00E01, 0x00E3A), (0x00E40, 0x00E4E), (0x00E50, 0x00E59), (0x00E81, 0x00F00),
    (0x00F18, 0x00F19), (0x00F20, 0x00F33), (0x00F35, 0x00F35), (0x00F37, 0x00F37),
    (0x00F39, 0x00F39), (0x00F3E, 0x00F84), (0x00F86, 0x00FBC), (0x00FC6, 0x00FC6),
    (0x01000, 0x01049), (0x01050, 0x0109D), (0x01780, 0x017D3), (0x017D7, 0x017D7),
    (0x017DC, 0x017F9), (0x03005, 0x03007), (0x03021, 0x0302D), (0x03031, 0x03035),
    (0x03038, 0x0303C), (0x03041, 0x0309A), (0x0309D, 0x0309F), (0x030A1, 0x030FA),
    (0x030FC, 0x0312F), (0x03192, 0x03195), (0x031A0, 0x031BF), (0x031F0, 0x031FF),
    (0x03220, 0x03229), (0x03280, 0x03289), (0x03400, 0x04DBF), (0x04E00, 0x0A48C),
    (0x0A9E0, 0x0A9FE), (0x0AA60, 0x0AA76), (0x0AA7A, 0x0AA7F), (0x0F900, 0x0FAD9),
    (0x0FF66, 0x0FF9F), (0x116D0, 0x116E3), (0x16FE3, 0x16FE3), (0x16FF0, 0x16FF6),
    (0x1AFF0, 0x1B168), (0x1D360, 0x1D371), (0x20000, 0x33479),
)

_SPACE = r"\s"  # for `re`, exactly the characters str.split() cuts on
_NO_SPACE = "".join(f"\\U{first:08x}-\\U{last:08x}" for first, last in NO_SPACE_RANGES)
# What clings to a no-space character: anything visible that is not a letter or digit.
# Combining marks are not \w either, so they cling too, which keeps "ที่" in one word.
# (Characters newer than Python 3.11's Unicode 14, e.g. CJK Extension I, are not \w
# for `re` either: after another no-space character they cling instead of counting.)
_CLINGING = rf"(?:[^\w{_SPACE}]|_)"

# What str.split() cuts on, as a lookup table; U+3000 is the last whitespace code point
# and the extra False entry stands for every code point above it.
_SPACE_TABLE = np.array([chr(c).isspace() for c in range(0x3001)] + [False])

# The same ranges as a lookup table over code points, for scanning whole batches in numpy.
_NO_SPACE_TABLE = np.zeros(NO_SPACE_RANGES[-1][1] + 2, dtype=bool)
for _first, _last in NO_SPACE_RANGES:
    _NO_SPACE_TABLE[_first:_last + 1] = True

_NO_SPACE_CHAR = re.compile(f"[{_NO_SPACE}]")
_WHITESPACE_WORD = re.compile(f"[^{_SPACE}]+")
# The rule as a regex scanned left to right: its definition, which `text_word_spans` computes
# in numpy (tests hold the two together).
_WORD = re.compile(
    # One no-space character with the marks and punctuation around it ...
    rf"{_CLINGING}*+[{_NO_SPACE}]{_CLINGING}*+"
    # ... or a run of anything else, up to whitespace or a no-space character ...
    rf"|[^{_SPACE}{_NO_SPACE}]++"
    # ... or, so that no character goes uncounted, a stray mark standing alone.
    rf"|[^{_SPACE}]"
)


def word_spans(text: str) -> list[tuple[int, int]]:
    """Return the [start, end) character spans of the words of `text`, in order."""
    if not _NO_SPACE_CHAR.search(text):
        return [match.span() for match in _WHITESPACE_WORD.finditer(text)]
    return [tuple(span) for span in text_word_spans(code_points(text)).tolist()]


# str.isalnum() by code point, filled in as code points are met (-1: not asked yet).
_ALNUM = np.full(0x110000, -1, dtype=np.int8)


def _alnum(codes: np.ndarray) -> np.ndarray:
    known = _ALNUM[codes]
    if (known < 0).any():
        for code in np.unique(codes[known < 0]).tolist():
            _ALNUM[code] = chr(code).isalnum()
        known = _ALNUM[codes]
    return known.astype(bool)


def text_word_spans(codes: np.ndarray) -> np.ndarray:
    """Return the (n, 2) word spans of a text given as code points, in numpy.

    The same words as the left-to-right scan of `_WORD` (tests hold the two together). Every
    character other than whitespace is a no-space character alone (A), a no-space mark (M,
    clinging and no-space at once), clinging (P) or other (O). Each A makes one word with the
    clinging characters that follow it; the clinging run (C: M and P) before an A joins it
    too when whitespace precedes the run, or, after an O, from the run's first M on; every
    other run of P and O is one word; an M that reaches no A is a word alone.
    """
    size = len(codes)
    if not size:
        return np.zeros((0, 2), dtype=np.int64)
    space = _SPACE_TABLE[np.minimum(codes, len(_SPACE_TABLE) - 1)]
    no_space = no_space_characters(codes)
    clinging = ~_alnum(codes) & ~space
    a, m, p = no_space & ~clinging, no_space & clinging, clinging & ~no_space
    o = ~space & ~no_space & ~clinging
    # Class codes, and those of each character's neighbours (whitespace beyond the ends).
    kind = np.select([a, m, p, o], [1, 2, 3, 4], 0).astype(np.int8)  # 0: whitespace
    before = np.concatenate(([0], kind[:-1]))
    after = np.concatenate((kind[1:], [0]))
    # The clinging runs: where each starts and ends, what stands before and after it, its first M.
    run_start = clinging & ~np.isin(before, (2, 3))
    run_end = clinging & ~np.isin(after, (2, 3))
    run = np.cumsum(run_start) - 1
    starts, ends = np.flatnonzero(run_start), np.flatnonzero(run_end) + 1
    left = before[starts]
    right = np.where(ends < size, kind[np.minimum(ends, size - 1)], 0)
    first_m = np.full(len(starts), size)
    m_at = np.flatnonzero(m)
    np.minimum.at(first_m, run[m_at], m_at)
    has_m = first_m < size
    # A run before an A joins it when whitespace comes first, or (from its first M) after an O.
    joins_from_start = (right == 1) & (left == 0)
    joins_from_m = (right == 1) & (left == 4) & has_m
    word = np.zeros(size, dtype=bool)
    word[a] = True
    ahead = np.flatnonzero(a & np.isin(before, (2, 3)))  # A characters right after a run
    word[ahead[joins_from_start[run[ahead - 1]] | joins_from_m[run[ahead - 1]]]] = False
    word[starts[joins_from_start]] = True
    word[first_m[joins_from_m]] = True
    # Runs that reach no A and follow no A: each M is a word, and so is each run of P after
    # an M, or at the start of a run after whitespace (after an O, those P join its word).
    loose = np.zeros(len(starts) + 1, dtype=bool)
    loose[:-1] = (right != 1) & (left != 1)
    in_loose = clinging & loose[np.where(clinging, run, len(starts))]
    word |= in_loose & m
    word |= in_loose & p & (before == 2)
    word[starts[loose[:-1] & (left == 0) & p[starts]]] = True
    # An O starts a word unless it continues a run of P and O: after whitespace, an A, an M,
    # or a P that clings to an A.
    after_a_run = np.zeros(size, dtype=bool)
    after_a_run[clinging] = (left == 1)[run[clinging]]
    word |= o & (np.isin(before, (0, 1, 2)) | ((before == 3) & np.concatenate(([False], after_a_run[:-1]))))
    # A word runs until the next word starts or whitespace comes.
    begins = np.flatnonzero(word)
    stops = np.flatnonzero(word | space)
    limits = np.append(stops, size)
    return np.stack([begins, limits[np.searchsorted(stops, begins, side="right")]], axis=1)


def code_points(text: str) -> np.ndarray:
    """Return the code points of `text` as a uint32 array."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


class JoinedLines:
    """Lines end to end, `separator` between them: the text, its code points, and each line's
    length and start in it."""

    def __init__(self, lines: Sequence[str], separator: str = "") -> None:
        self.lines = lines
        self.text = separator.join(lines)
        self.codes = code_points(self.text)
        self.lengths = np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))
        strides = self.lengths + len(separator)
        self.starts = np.cumsum(strides) - strides


def no_space_characters(codes: np.ndarray) -> np.ndarray:
    """Return where `code_points(text)` has a character of a script written without spaces."""
    return _NO_SPACE_TABLE[np.minimum(codes, len(_NO_SPACE_TABLE) - 1)]


def whitespace_word_spans(text: str, codes: np.ndarray | None = None) -> np.ndarray:
    """Return the (n, 2) [start, end) spans of `text`'s whitespace words, scanned in numpy."""
    # The whitespace rule alone, vectorised for batches of lines that word_spans would
    # walk word by word in Python; callers apply the per-character rule where it is due.
    codes = code_points(text) if codes is None else codes
    # Padded with a space on both sides, edges alternate: word start, word end, ...
    space = np.ones(len(codes) + 2, dtype=bool)
    space[1:-1] = _SPACE_TABLE[np.minimum(codes, len(_SPACE_TABLE) - 1)]
    return np.flatnonzero(space[1:] != space[:-1]).reshape(-1, 2)


def count_words(text: str) -> int:
    """Return the number of words of `text` under the rule of this module."""
    return len(word_spans(text))


def contains_no_space_script(text: str) -> bool:
    """Return whether `text` has a character of a script written without spaces."""
    return _NO_SPACE_CHAR.search(text) is not None


def word_rule(has_no_space_chars: bool) -> str:
    """Return the name of the rule that counted a corpus's words, to store beside them."""
    return PER_CHARACTER if has_no_space_chars else WHITESPACE
