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

import functools
import re
from collections.abc import Sequence

import numpy as np
from numba import njit

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

# The same ranges as a lookup table over code points, for `_scan`.
_NO_SPACE_TABLE = np.zeros(NO_SPACE_RANGES[-1][1] + 2, dtype=bool)
for _first, _last in NO_SPACE_RANGES:
    _NO_SPACE_TABLE[_first:_last + 1] = True

_NO_SPACE_CHAR = re.compile(f"[{_NO_SPACE}]")
# The rule as a regex scanned left to right: its definition, which `_scan` follows character
# by character, compiled (tests hold the two together).
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
    spans, _ = scan_words(code_points(text))
    return [tuple(span) for span in spans.tolist()]


def scan_words(codes: np.ndarray) -> tuple[np.ndarray, bool]:
    """The (n, 2) word spans of a text given as code points, and whether it has a character of
    a no-space script (which names the rule applied, `word_rule`)."""
    return _scan(codes, _SPACE_TABLE, _NO_SPACE_TABLE, _alnum_table())


@njit(cache=True, nogil=True)
def _scan(codes: np.ndarray, space_table: np.ndarray, no_space_table: np.ndarray,
          alnum_table: np.ndarray) -> tuple[np.ndarray, bool]:
    """`_WORD`'s matches, scanned left to right as `re.finditer` does: at each character other than
    whitespace, a no-space character with the clinging runs around it (possessive), else a run of
    characters neither whitespace nor no-space, else the one character. Linear: the end of the
    clinging run is remembered, since every character of a run ends it at the same place."""
    size = len(codes)
    spans = np.empty((size, 2), dtype=np.int64)
    words = 0
    last_space, last_no_space = len(space_table) - 1, len(no_space_table) - 1
    space = np.empty(size, dtype=np.bool_)
    no_space = np.empty(size, dtype=np.bool_)
    saw_no_space = False
    for i in range(size):
        space[i] = space_table[min(codes[i], last_space)]
        no_space[i] = no_space_table[min(codes[i], last_no_space)]
        saw_no_space |= no_space[i]
    run_end = 0  # where the clinging run through the characters before it ends
    i = 0
    while i < size:
        if space[i]:
            i += 1
            continue
        # A no-space character with the clinging runs around it (none without no-space characters).
        if saw_no_space:
            if i >= run_end:
                run_end = i
                while run_end < size and _clings(codes[run_end], space[run_end], alnum_table):
                    run_end += 1
            end = run_end
            if end < size and no_space[end] and not _clings(codes[end], space[end], alnum_table):
                end += 1
                while end < size and _clings(codes[end], space[end], alnum_table):
                    end += 1
                spans[words, 0], spans[words, 1] = i, end
                words += 1
                i = end
                continue
        # A run of anything else, up to whitespace or a no-space character.
        end = i
        while end < size and not space[end] and not no_space[end]:
            end += 1
        # Else, so that no character goes uncounted, a stray mark standing alone.
        end = max(end, i + 1)
        spans[words, 0], spans[words, 1] = i, end
        words += 1
        i = end
    return spans[:words].copy(), saw_no_space


@njit(cache=True, nogil=True)
def _clings(code: int, space: bool, alnum_table: np.ndarray) -> bool:
    """Whether a character is `_CLINGING`: neither a word character (alnum) nor whitespace."""
    return not space and not alnum_table[code]


@functools.cache
def _alnum_table() -> np.ndarray:
    """str.isalnum() by code point (a tenth of a second, once per process)."""
    return np.fromiter((chr(code).isalnum() for code in range(0x110000)), dtype=np.bool_, count=0x110000)


def code_points(text: str) -> np.ndarray:
    """Return the code points of `text` as a uint32 array."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def line_lengths(lines: Sequence[str]) -> np.ndarray:
    """How many characters each line has."""
    return np.fromiter(map(len, lines), dtype=np.int64, count=len(lines))


def utf8_lines(lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The lines' UTF-8 bytes end to end (a lone surrogate kept as three bytes), and how many
    characters each line has: what the compiled loops walk a batch by."""
    return np.frombuffer("".join(lines).encode("utf-8", "surrogatepass"), dtype=np.uint8), line_lengths(lines)


def count_words(text: str) -> int:
    """Return the number of words of `text` under the rule of this module."""
    return len(word_spans(text))


def contains_no_space_script(text: str) -> bool:
    """Return whether `text` has a character of a script written without spaces."""
    return _NO_SPACE_CHAR.search(text) is not None


def word_rule(has_no_space_chars: bool) -> str:
    """Return the name of the rule that counted a corpus's words, to store beside them."""
    return PER_CHARACTER if has_no_space_chars else WHITESPACE
