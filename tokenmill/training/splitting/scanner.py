"""The presets' patterns in compiled code: UTF-8 to classes, and where each piece ends.

A batch is UTF-8 bytes (texts end to end) and each text's length in characters. `decode` gives
every character its class (tokenmill.training.splitting.classes) and its first byte; a scanner
then finds, from a character, where the piece starting there ends, exactly as `regex.findall`
with the preset's pattern would (each scanner's comments walk its pattern's alternatives, with
the backtracking that decides between them); `piece_ends` does it for every text of a batch.

Every preset pattern matches something at every character and never the empty string, so the
pieces of a text are a partition of it: one scanner step per piece, in linear time (where
`regex` backtracks, a scanner looks at most at the run it is in).

Deliberately not handled: any other pattern (tokenmill.training.splitting.counting.preset_of
says which apply), and invalid UTF-8 (the bytes come from a str's encode; a lone surrogate,
encoded "surrogatepass", is a character like any other, of `regex`'s class for it).
"""

import numpy as np
import numpy.typing as npt
from numba import njit

from tokenmill.training.splitting.classes import (
    APOSTROPHE,
    BLANK,
    FOLD_D,
    FOLD_E,
    FOLD_L,
    FOLD_M,
    FOLD_MASK,
    FOLD_R,
    FOLD_S,
    FOLD_SHIFT,
    FOLD_T,
    FOLD_V,
    LETTER,
    LITERAL,
    LOWER,
    NEWLINE,
    NUMBER,
    SLASH,
    SPACE,
    UPPER,
)

GPT2, CL100K, O200K = range(3)
NOT_OTHER = LETTER | NUMBER | SPACE  # [^\s\p{L}\p{N}] is a class with none of these
NOT_PREFIX = NEWLINE | LETTER | NUMBER  # [^\r\n\p{L}\p{N}]
LETTERISH = UPPER | LOWER  # o200k's letter classes: the letters and the marks

Uint8s = npt.NDArray[np.uint8]
Uint16s = npt.NDArray[np.uint16]
Int32s = npt.NDArray[np.int32]
Int64s = npt.NDArray[np.int64]


@njit(cache=True, nogil=True)
def decoded(data: Uint8s, index: Int32s, rows: Uint16s) -> tuple[Uint16s, Int64s]:
    """Each character's class, and where each starts in the data (and where the last ends)."""
    classes = np.empty(len(data), dtype=np.uint16)  # at most one character per byte
    offsets = np.empty(len(data) + 1, dtype=np.int64)
    characters = decode(data, index, rows, classes, offsets)
    return classes[:characters], offsets[:characters + 1]


@njit(cache=True, nogil=True)
def decode(data: Uint8s, index: Int32s, rows: Uint16s, classes: Uint16s, offsets: Int64s) -> int:
    """Each character's class and first byte (offsets[characters] = len(data)); the number of characters."""
    k = 0
    b = 0
    n = len(data)
    while b < n:
        lead = np.int64(data[b])
        if lead < 0x80:
            point, width = lead, 1
        elif lead < 0xE0:
            point, width = ((lead & 0x1F) << 6) | (np.int64(data[b + 1]) & 0x3F), 2
        elif lead < 0xF0:
            point = ((lead & 0x0F) << 12) | ((np.int64(data[b + 1]) & 0x3F) << 6) | (np.int64(data[b + 2]) & 0x3F)
            width = 3
        else:
            point = (((lead & 0x07) << 18) | ((np.int64(data[b + 1]) & 0x3F) << 12)
                     | ((np.int64(data[b + 2]) & 0x3F) << 6) | (np.int64(data[b + 3]) & 0x3F))
            width = 4
        classes[k] = rows[index[point >> 8], point & 0xFF]
        offsets[k] = b
        k += 1
        b += width
    offsets[k] = n
    return k


@njit(cache=True, nogil=True)
def _contraction(first: int, second: int, literal: bool) -> int:
    # How many characters after an apostrophe '(?:[sdmt]|ll|ve|re) takes (case-insensitive
    # unless `literal`): 1, 2 or 0 (none), from the classes of the two characters after it (0
    # past the text's end).
    if literal and not first & LITERAL:
        return 0
    letter = (first & FOLD_MASK) >> FOLD_SHIFT
    if letter == FOLD_S or letter == FOLD_D or letter == FOLD_M or letter == FOLD_T:  # noqa: SIM109 - numba
        return 1
    if (letter == FOLD_L or letter == FOLD_V or letter == FOLD_R) and (second & LITERAL or not literal):  # noqa: SIM109
        return 2 if (second & FOLD_MASK) >> FOLD_SHIFT == (FOLD_L if letter == FOLD_L else FOLD_E) else 0
    return 0


@njit(cache=True, nogil=True, inline="always")
def _after(classes: Uint16s, i: int, end: int) -> int:
    return classes[i] if i < end else 0


@njit(cache=True, nogil=True)
def piece_ends(classes: Uint16s, offsets: Int64s, text_chars: Int64s, preset: int) -> Int64s:
    """Where each piece of the texts ends, text after text: offsets[the character after it]
    (`decode`'s offsets: its end in bytes; 0, 1, 2, ...: in characters)."""
    ends = np.empty(int(text_chars.sum()), dtype=np.int64)
    return ends[:scan(classes, offsets, text_chars, preset, ends)]


@njit(cache=True, nogil=True)
def scan(classes: Uint16s, offsets: Int64s, text_chars: Int64s, preset: int, ends: Int64s) -> int:
    """`piece_ends` written into `ends` (room for a piece per character); the number of pieces."""
    if preset == GPT2:
        return _gpt2(classes, offsets, text_chars, ends)
    if preset == CL100K:
        return _cl100k(classes, offsets, text_chars, ends)
    return _o200k(classes, offsets, text_chars, ends)


# The scanners: one loop each, a piece per step. The class of a piece's first character (and of
# the next) decides which of the pattern's alternatives matches first, so each step branches on
# it, commonest first; the comments say why the order is the pattern's. Written out rather than
# calling helpers: numba made twice as slow a loop of those (123 ms for 20 MB against 62 ms).

@njit(cache=True, nogil=True)
def _gpt2(classes: Uint16s, offsets: Int64s, text_chars: Int64s, ends: Int64s) -> int:
    # '(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s
    m = 0
    begin = 0
    for t in range(len(text_chars)):
        end = begin + text_chars[t]
        i = begin
        while i < end:
            c = classes[i]
            j = i + 1
            if c & BLANK and j < end and not classes[j] & SPACE:
                c = classes[j]  # " ?" takes a space before a letter, number or other (else gives it back)
                j += 1
            if c & LETTER:
                while j < end and classes[j] & LETTER:
                    j += 1
            elif c & NUMBER:
                while j < end and classes[j] & NUMBER:
                    j += 1
            elif not c & SPACE:
                taken = 0
                if c & APOSTROPHE and j == i + 1:  # the contractions, case-sensitive here, come first
                    taken = _contraction(_after(classes, j, end), _after(classes, j + 1, end), True)
                j += taken
                while not taken and j < end and not classes[j] & NOT_OTHER:
                    j += 1
            else:
                # \s++$: a run of spaces to the text's end is one piece ($ would also hold
                # before a final \n, but \s++ has taken it); \s+(?!\S): one before a non-space
                # leaves its last space to the next piece; \s: unless that is its only one.
                while j < end and classes[j] & SPACE:
                    j += 1
                if j < end and j - 1 > i:
                    j -= 1
            ends[m] = offsets[j]
            m += 1
            i = j
        begin = end
    return m


@njit(cache=True, nogil=True)
def _cl100k(classes: Uint16s, offsets: Int64s, text_chars: Int64s, ends: Int64s) -> int:
    # '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|
    # \s+(?!\S)|\s  (PATTERNS' cl100k; tiktoken's own \p{N}{1,3}+ matches the same)
    m = 0
    begin = 0
    for t in range(len(text_chars)):
        end = begin + text_chars[t]
        i = begin
        while i < end:
            c = classes[i]
            j = i + 1
            taken = 0
            if c & APOSTROPHE:
                taken = _contraction(_after(classes, j, end), _after(classes, j + 1, end), False)
            if taken:
                j += taken
            elif c & LETTER:
                while j < end and classes[j] & LETTER:
                    j += 1
            elif not c & NOT_PREFIX and j < end and classes[j] & LETTER:
                # The prefix, taken possessively: what follows it must be letters.
                j += 1
                while j < end and classes[j] & LETTER:
                    j += 1
            elif c & NUMBER:
                while j < end and j < i + 3 and classes[j] & NUMBER:
                    j += 1
            elif not c & NOT_OTHER or (c & BLANK and j < end and not classes[j] & NOT_OTHER):
                while j < end and not classes[j] & NOT_OTHER:
                    j += 1
                while j < end and classes[j] & NEWLINE:
                    j += 1
            else:
                # \s++$ takes a run of spaces to the end; \s*[\r\n] backtracks to the run's last
                # \r or \n; \s+(?!\S) and \s as in gpt2.
                while j < end and classes[j] & SPACE:
                    j += 1
                if j < end:
                    k = j - 1
                    while k >= i and not classes[k] & NEWLINE:
                        k -= 1
                    j = k + 1 if k >= i else j - 1 if j - 1 > i else i + 1
            ends[m] = offsets[j]
            m += 1
            i = j
        begin = end
    return m


@njit(cache=True, nogil=True)
def _o200k(classes: Uint16s, offsets: Int64s, text_chars: Int64s, ends: Int64s) -> int:
    # [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
    # [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
    # \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
    # (UPPER and LOWER are the two letter classes; a mark is in both, and is a prefix too.)
    m = 0
    begin = 0
    for t in range(len(text_chars)):
        end = begin + text_chars[t]
        i = begin
        while i < end:
            c = classes[i]
            j = i + 1
            prefix = not c & NOT_PREFIX and j < end and classes[j] & LETTERISH
            if c & LETTERISH or prefix:
                # The first alternative, with the prefix then without it: the UPPER run, given
                # back a character at a time until a LOWER one ends it or follows it (the last
                # LOWER at or before the run's end), then the LOWER run from there.
                j = 0
                s = i + 1 if prefix else i
                while True:
                    a = s
                    while a < end and classes[a] & UPPER:
                        a += 1
                    p = a if a < end and classes[a] & LOWER else a - 1
                    while p >= s and not classes[p] & LOWER:
                        p -= 1
                    if p >= s:
                        j = p + 1
                        while j < end and classes[j] & LOWER:
                            j += 1
                        break
                    if s == i or not c & LETTERISH:
                        break
                    s = i
                if j == 0:
                    # The second: an UPPER run (after the prefix if one follows it), then LOWER.
                    j = i + 1 if prefix and classes[i + 1] & UPPER else i
                    while j < end and classes[j] & UPPER:
                        j += 1
                    while j < end and classes[j] & LOWER:
                        j += 1
                if j < end and classes[j] & APOSTROPHE:  # the contraction, if one follows
                    taken = _contraction(_after(classes, j + 1, end), _after(classes, j + 2, end), False)
                    j += taken + 1 if taken else 0
            elif c & NUMBER:
                while j < end and j < i + 3 and classes[j] & NUMBER:
                    j += 1
            elif not c & NOT_OTHER or (c & BLANK and j < end and not classes[j] & NOT_OTHER):
                while j < end and not classes[j] & NOT_OTHER:
                    j += 1
                while j < end and classes[j] & (NEWLINE | SLASH):
                    j += 1
            else:
                # \s*[\r\n]+ backtracks to the run's last \r or \n (the [\r\n]+ after it is that
                # one); else \s+(?!\S) and \s+ as gpt2's \s+(?!\S) and \s (no \s++$ here).
                while j < end and classes[j] & SPACE:
                    j += 1
                k = j - 1
                while k >= i and not classes[k] & NEWLINE:
                    k -= 1
                if k >= i:
                    j = k + 1
                elif j < end and j - 1 > i:
                    j -= 1
            ends[m] = offsets[j]
            m += 1
            i = j
        begin = end
    return m
