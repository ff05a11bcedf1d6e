"""Documents, words and characters of UTF-8 text, counted a block of whole lines at a time with numpy.

The counts are exactly those of the per-line definitions (tokenmill.corpora.reading): a line ends at
"\\n" and loses one trailing "\\r"; it is a document unless `line.strip()` is empty; a
document has `len(line.split())` words and `len(line)` characters. Python's whitespace
(`str.isspace`, which both `strip` and `split` use) is ten ASCII bytes and nineteen
multi-byte characters; with every byte of each marked as space:

- words are the bytes that are not space and follow a space (or start the block);
- a line is a document when one of its bytes is not space;
- characters are a document's bytes, less its trailing "\\r", less its continuation bytes
  (0b10xxxxxx); the continuation bytes outside documents belong to the multi-byte
  whitespace of blank lines, which is found and marked anyway.

Deliberately not handled: validating the UTF-8 (the caller decodes first; the counts of
invalid bytes mean nothing) and lines cut across calls (each block holds whole lines; only
the last block of a stream may end without "\\n").
"""

from dataclasses import dataclass, field

import numpy as np

# \t \n \v \f \r, the four information separators \x1c-\x1f, and space.
ASCII_SPACES = b"\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f "
# U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000, as UTF-8.
MULTIBYTE_SPACES = tuple(chr(code).encode() for code in (
    0x85, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x2028, 0x2029, 0x202F, 0x205F, 0x3000))
NEWLINE, CR = 0x0A, 0x0D
SCRATCH_BYTES = 2 * 1024 * 1024  # blocks up to this size reuse one set of work arrays
SCRATCH_STEP = 256 * 1024  # which grows in steps of this size

# The lead bytes of the multi-byte spaces: 0xC2 for the two-byte ones, 0xE1 to 0xE3 for the three-byte ones.
LEAD2, LEADS3 = 0xC2, range(0xE1, 0xE4)
# Each multi-byte space by its bytes as one integer.
_KEYS2 = np.array([int.from_bytes(s) for s in MULTIBYTE_SPACES if len(s) == 2], dtype=np.int64)
_KEYS3 = np.array([int.from_bytes(s) for s in MULTIBYTE_SPACES if len(s) == 3], dtype=np.int64)


@dataclass
class TextCounts:
    """Documents (non-blank lines), words and characters, as the per-line definitions count them."""

    lines: int = 0
    words: int = 0
    characters: int = 0
    # Work arrays kept between blocks: fresh megabyte arrays cost a page fault per 4 KiB each time.
    _scratch: "Scratch | None" = field(default=None, repr=False, compare=False)

    def add(self, block: bytes | memoryview) -> None:
        """Count a block of whole lines of valid UTF-8 (the last block of a stream may lack its final "\\n")."""
        lines, words, characters = count_block(block, self._scratch_for(len(block)))
        self.lines += lines
        self.words += words
        self.characters += characters

    def add_documents(self, documents: list[str]) -> None:
        """Count documents already read out of their lines (jsonl's text fields): each one counts, however blank."""
        self.lines += len(documents)
        self.characters += sum(map(len, documents))
        # Joined by a space, the documents hold the sum of their words: counted as bytes, not split
        # into a list of strings. A surrogate (from a JSON escape) counts as the non-space it is.
        joined = " ".join(documents).encode("utf-8", "surrogatepass")
        self.words += count_block(joined, self._scratch_for(len(joined)))[1]

    def _scratch_for(self, size: int) -> "Scratch":
        if self._scratch is not None and self._scratch.size >= size:
            return self._scratch
        scratch = Scratch(-(-size // SCRATCH_STEP) * SCRATCH_STEP)
        if scratch.size <= SCRATCH_BYTES:  # kept; the arrays for a longer line are not
            self._scratch = scratch
        return scratch


class Scratch:
    """A byte and three boolean work arrays, viewed at the length of each block."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.numbers = np.empty(size, dtype=np.uint8)
        self.space = np.empty(size, dtype=bool)
        self.mask = np.empty(size, dtype=bool)
        self.other = np.empty(size, dtype=bool)

    def views(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.numbers[:size], self.space[:size], self.mask[:size], self.other[:size]


def count_block(block: bytes | memoryview, scratch: Scratch | None = None) -> tuple[int, int, int]:
    """(documents, words, characters) of a block of whole lines of valid UTF-8."""
    if not block:
        return 0, 0, 0
    data = np.frombuffer(block, dtype=np.uint8)
    numbers, space, mask, other = (scratch or Scratch(len(block))).views(len(block))
    _space_mask(data, numbers, space, mask)
    spaces2, spaces3 = _mark_multibyte_spaces(data, space, numbers, mask, other)
    # Lines: each starts after a newline and runs through its own newline (so none is empty);
    # the last block of a stream may end in a line without one.
    newlines = np.flatnonzero(np.equal(data, NEWLINE, out=mask))
    ends = newlines if block[-1] == NEWLINE else np.append(newlines, len(block))
    starts = np.empty_like(ends)
    starts[0], starts[1:] = 0, ends[:-1] + 1
    documents = ~np.logical_and.reduceat(space, starts)
    # A word starts at every byte that is not space after one that is (the block starts a line).
    words = int(np.count_nonzero(np.greater(space[:-1], space[1:], out=mask[1:]))) + int(not space[0])
    # Characters: the documents' bytes without "\n" and a trailing "\r", less their continuation bytes.
    document_ends = ends[documents]
    document_bytes = int((document_ends - starts[documents]).sum())
    carriage_returns = int(np.count_nonzero(data[document_ends - 1] == CR))
    continuations = int(np.count_nonzero(np.equal(np.bitwise_and(data, 0xC0, out=numbers), 0x80, out=mask)))
    for positions, width in ((spaces2, 2), (spaces3, 3)):
        line = np.searchsorted(starts, positions, side="right") - 1
        continuations -= (width - 1) * int(np.count_nonzero(~documents[line]))
    characters = document_bytes - carriage_returns - continuations
    return int(np.count_nonzero(documents)), words, characters


def _space_mask(data: np.ndarray, numbers: np.ndarray, space: np.ndarray, mask: np.ndarray) -> None:
    # Into `space`: the ASCII whitespace bytes, 0x09-0x0D and 0x1C-0x20 (two ranges, each tested
    # with one subtraction that wraps around in uint8 and one comparison).
    np.less(np.subtract(data, np.uint8(0x09), out=numbers), 5, out=space)
    np.less(np.subtract(data, np.uint8(0x1C), out=numbers), 5, out=mask)
    np.logical_or(space, mask, out=space)


def _mark_multibyte_spaces(data: np.ndarray, space: np.ndarray, numbers: np.ndarray, mask: np.ndarray,
                           other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # Marks every byte of each multi-byte space in `space`; returns where the 2- and 3-byte ones start.
    if data.max() < LEAD2:
        return _NONE, _NONE
    np.equal(data, LEAD2, out=mask)
    np.less(np.subtract(data, np.uint8(LEADS3.start), out=numbers), len(LEADS3), out=other)
    candidates = np.flatnonzero(np.logical_or(mask, other, out=mask))
    if not len(candidates):
        return _NONE, _NONE
    last = len(data) - 1
    key2 = data[candidates].astype(np.int64) << 8 | data[np.minimum(candidates + 1, last)]
    key3 = key2 << 8 | data[np.minimum(candidates + 2, last)]
    spaces2 = candidates[np.isin(key2, _KEYS2) & (candidates + 1 <= last)]
    spaces3 = candidates[np.isin(key3, _KEYS3) & (candidates + 2 <= last)]
    for positions, width in ((spaces2, 2), (spaces3, 3)):
        for offset in range(width):
            space[positions + offset] = True
    return spaces2, spaces3


_NONE = np.empty(0, dtype=np.int64)
