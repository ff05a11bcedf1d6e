"""sentencepiece's ids for each distinct word, so that a corpus is encoded a word at a time.

A sentencepiece model that normalizes nothing (identity rule) reads a line as "▁" + the
line with each space turned into "▁", and no piece of it holds a "▁" but at its start. So
every "▁" starts a piece, and the pieces of a line are those of its words one after the
other (a word here is "▁" + the text up to the next space: `line.split(" ")`). Each
distinct word is segmented once and its ids are looked up after that, in compiled code that
hands back the batch's ids as arrays, with no Python list per line. Most words of a corpus
repeat, so this is faster than encoding every line, and it gives sentencepiece's ids
(`tokenmill.evaluation.encoders.proven_encoder` also shows it on each corpus before use; tests hold it
on many texts):

- BPE (`BpeWords`) merges the pair of highest score first, leftmost among equals, and no
  merge crosses a word, so a word's pieces do not depend on its neighbours. New words are
  encoded by sentencepiece together, as lines of words, and each word's ids are found where
  the pieces' lengths reach its end; where they do not (a model that breaks the rule
  above), the batch is refused (`encode` gives None) and the cache starts over.
- Unigram (`UnigramWords`) sums a path's scores in float32 along the whole line, so where
  two segmentations of a word score within rounding of each other, sentencepiece's choice
  depends on the score of the line before the word ("cruel": "▁c ru el" or "▁c r uel",
  0.00056 apart, in one 32k model). New words are segmented here (`tokenmill.evaluation.unigram`), with
  the margin of their best path over the second; a line is taken from the cache only where
  every word's margin is beyond what rounding after the line's score so far can close, and
  is `unsure` otherwise, for sentencepiece to encode (0.6 % of the bytes of BENCHMARKS.md's text).

Deliberately not handled: models that normalize, or with a piece holding "▁" after its
start (a user-defined symbol with a space), which `applies` refuses. The cache lives for one
measurement (`clear`), so no corpus is measured faster for coming after another, and holds
at most `MAX_WORDS` words or `MAX_KEY_BYTES` bytes (plus one batch's) before it starts over.
"""

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit

from tokenmill.corpora.words import utf8_lines
from tokenmill.evaluation.unigram import Pieces, segment_words
from tokenmill.evaluation.utf8 import SEQUENCE_BYTES
from tokenmill.formats.sentencepiece_model import BPE, ModelProto

MAX_WORDS = 1 << 20
MAX_KEY_BYTES = 32 << 20
_GROUP_BYTES = 1 << 14  # new BPE words are encoded in lines of about this many bytes

# A row of the table per word: its code (`_key_code`), where its bytes start in the keys and
# how many there are (EMPTY: a free row), and where its ids start and how many there are (-1:
# none, the lines holding the word go to sentencepiece). Each word also has a row of floats:
# its best path's score and the line score it is sure after (`tokenmill.evaluation.unigram.sure_before`;
# 0 and inf for a BPE word).
_HASH, _KEY_START, _KEY_LENGTH, _ID_START, _ID_LENGTH = range(5)
_PACKED = 7  # bytes of a word whose code is the word itself
_SCORE, _SURE_BEFORE = range(2)
EMPTY = -1

Encode = Callable[[list[str]], list[list[int]]]


def applies(proto: ModelProto) -> bool:
    """Whether a model encodes words apart: BPE or Unigram (with byte fallback, no user-defined
    pieces) that normalizes nothing, "▁" only at a piece's start."""
    kind = proto.trainer_spec.model_type
    return (proto.normalizer_spec.name == "identity" and not any("\u2581" in piece.piece[1:] for piece in proto.pieces)
            and (kind == BPE or Pieces.applies(proto)))


def word_cache(proto: ModelProto, encode: Encode, pieces: Sequence[bytes | None],
               byte_ids: frozenset[int]) -> "WordCache":
    """The cache for a model `applies` accepts; `encode` is sentencepiece's, line by line, and
    `pieces` the bytes each id stands for ("▁" a space; None: no fixed bytes)."""
    piece_byte = np.array([piece[0] if i in byte_ids and piece is not None else -1 for i, piece in enumerate(pieces)],
                          dtype=np.int64)
    piece_chars = np.array([0 if piece is None else len(piece.decode("utf-8", "replace")) for piece in pieces],
                           dtype=np.int64)
    if proto.trainer_spec.model_type == BPE:
        # How many bytes of the normalized text ("▁": three) each id stands for, or -1.
        piece_bytes = np.array([1 if i in byte_ids else -1 if piece is None else len(piece) + 2 * piece.count(b" ")
                                for i, piece in enumerate(pieces)], dtype=np.int64)
        return BpeWords(encode, piece_bytes, piece_chars, piece_byte)
    return UnigramWords(Pieces.of(proto), piece_chars, piece_byte)


class Words(NamedTuple):
    """A batch of lines from the cache: flat ids, their (n, 2) character spans (read off the
    pieces, as `tokenmill.evaluation.spelling` would), tokens per line, and the unsure lines, whose ids and
    spans are to be taken from sentencepiece instead (a line holding a literal "▁", which a
    piece would read as a space, is one)."""

    flat: np.ndarray
    spans: np.ndarray
    counts: np.ndarray
    unsure: np.ndarray


class WordCache:
    """Word -> ids: an open-addressing table of word codes, the words' bytes end to end (the
    keys), each followed by a space, and their ids end to end. Subclasses segment new words."""

    def __init__(self, piece_chars: np.ndarray, piece_byte: np.ndarray) -> None:
        # How many characters each piece stands for ("▁": one), and the byte of a byte piece (else -1).
        self._piece_chars = piece_chars
        self._piece_byte = piece_byte
        self.clear()

    def clear(self) -> None:
        """Forget every word but the empty one (a space after a space, or at either end of a line)."""
        self._rows = _empty_rows(1 << 18)
        self._floats = _empty_floats(1 << 18)
        self._keys = np.zeros(1 << 20, dtype=np.uint8)
        self._ids = np.zeros(1 << 18, dtype=np.int64)
        self._id_count = 0
        nothing = np.zeros(1, dtype=np.int64)
        _, empty, self._words, self._key_bytes = _look_up(np.zeros(0, dtype=np.uint8), nothing, nothing, self._rows,
                                                          self._keys, 0, 0)
        self._keep_empty(int(empty[0]))

    def __len__(self) -> int:
        return self._words

    def encode(self, lines: Sequence[str]) -> Words | None:
        """The lines' ids and spans, and which lines are unsure; None if the model proves not to
        encode words apart."""
        data, line_chars = utf8_lines(lines)
        starts, ends, line_words, meta_symbol = _split(data, line_chars)
        self._reserve(len(starts), len(data) + len(starts))
        row_of, pending, self._words, self._key_bytes = _look_up(data, starts, ends, self._rows, self._keys,
                                                                 self._words, self._key_bytes)
        if len(pending):
            try:
                stored = self._store(pending)
            except BaseException:
                self.clear()  # the new words are in the table without their ids
                raise
            if not stored:
                self.clear()
                return None
        return Words(*_assemble(row_of, line_words, meta_symbol, self._rows, self._floats, self._ids,
                                self._piece_chars, self._piece_byte))

    def _keep_empty(self, row: int) -> None:
        raise NotImplementedError

    def _store(self, pending: np.ndarray) -> bool:
        """Segment the new words (rows) and keep their ids; False if the model proves not to
        encode words apart."""
        raise NotImplementedError

    def _room_for_ids(self, count: int) -> None:
        if self._id_count + count > len(self._ids):
            self._ids = _resized(self._ids, _grown(len(self._ids), self._id_count + count))

    def _reserve(self, words: int, key_bytes: int) -> None:
        """Room for `words` more words of `key_bytes` bytes in all (starting over if too full)."""
        if self._words + words > MAX_WORDS or self._key_bytes + key_bytes > MAX_KEY_BYTES:
            self.clear()
        if 2 * (self._words + words) > len(self._rows):  # at most half full, so probes stay short
            size = _grown(len(self._rows), 2 * (self._words + words))
            rows, floats = _empty_rows(size), _empty_floats(size)
            _rehash(self._rows, self._floats, rows, floats)
            self._rows, self._floats = rows, floats
        if self._key_bytes + key_bytes > len(self._keys):
            self._keys = _resized(self._keys, _grown(len(self._keys), self._key_bytes + key_bytes))


class BpeWords(WordCache):
    """sentencepiece BPE's words, encoded by sentencepiece."""

    def __init__(self, encode: Encode, piece_bytes: np.ndarray, piece_chars: np.ndarray, piece_byte: np.ndarray) -> None:
        self._encode = encode
        self._piece_bytes = piece_bytes
        # The empty word is "▁" alone, which cannot be asked as a line of its own: it is half
        # of the line " ".
        both = encode([" "])[0]
        if not len(both) or both[:len(both) // 2] != both[len(both) // 2:]:
            raise ValueError(f"a model whose pieces for two spaces are {both} does not encode words apart")
        self._lone_space = np.array(both[:len(both) // 2], dtype=np.int64)
        super().__init__(piece_chars, piece_byte)

    def _keep_empty(self, row: int) -> None:
        self._room_for_ids(len(self._lone_space))
        self._ids[self._id_count:self._id_count + len(self._lone_space)] = self._lone_space
        self._rows[row, _ID_START], self._rows[row, _ID_LENGTH] = self._id_count, len(self._lone_space)
        self._id_count += len(self._lone_space)

    def _store(self, pending: np.ndarray) -> bool:
        """Encode the new words with sentencepiece, in lines of words, and keep each word's ids;
        False if the pieces do not fall at the words' ends."""
        first = int(self._rows[pending[0], _KEY_START])  # the new words' keys are the last ones added
        keys = self._keys[first:self._key_bytes]
        cuts = _group_ends(keys, _GROUP_BYTES)
        text = keys.tobytes()
        lines = [text[start:end - 1].decode("utf-8", "surrogatepass") for start, end in zip([0, *cuts[:-1]], cuts)]
        encoded = self._encode(lines)
        total = sum(map(len, encoded))
        self._room_for_ids(total)
        flat = np.fromiter((token for ids in encoded for token in ids), dtype=np.int64, count=total)
        self._ids[self._id_count:self._id_count + total] = flat
        aligned = _align(flat, self._piece_bytes, self._rows, pending, self._id_count)
        self._id_count += total
        return aligned


class UnigramWords(WordCache):
    """sentencepiece Unigram's words, segmented here with their margins (`tokenmill.evaluation.unigram`)."""

    def __init__(self, pieces: Pieces, piece_chars: np.ndarray, piece_byte: np.ndarray) -> None:
        self._pieces = pieces
        super().__init__(piece_chars, piece_byte)

    def _keep_empty(self, row: int) -> None:
        self._store(np.array([row], dtype=np.int64))

    def _store(self, pending: np.ndarray) -> bool:
        # In the order of their first bytes: words that start alike walk the same trie units
        # one after another, while those are still in the processor's cache.
        pending = pending[np.argsort(_leading_bytes(self._keys, self._rows[pending, _KEY_START],
                                                    self._rows[pending, _KEY_LENGTH]), kind="stable")]
        lengths = self._rows[pending, _KEY_LENGTH]
        self._room_for_ids(int(lengths.sum()) + 3 * len(pending))  # n bytes: at most n + 3 ids
        id_starts, id_lengths, scores, limits, self._id_count = segment_words(
            self._keys, self._rows[pending, _KEY_START], lengths, self._pieces, self._ids, self._id_count)
        self._rows[pending, _ID_START], self._rows[pending, _ID_LENGTH] = id_starts, id_lengths
        self._floats[pending, _SCORE], self._floats[pending, _SURE_BEFORE] = scores, limits
        return True


def _grown(size: int, need: int) -> int:
    while size < need:
        size *= 2
    return size


def _resized(array: np.ndarray, size: int) -> np.ndarray:
    grown = np.zeros(size, dtype=array.dtype)
    grown[:len(array)] = array
    return grown


def _empty_floats(size: int) -> np.ndarray:
    floats = np.zeros((size, 2))
    floats[:, _SURE_BEFORE] = np.inf  # a BPE word is sure after anything
    return floats


def _empty_rows(size: int) -> np.ndarray:
    rows = np.zeros((size, 5), dtype=np.int64)
    rows[:, _KEY_LENGTH] = EMPTY
    return rows


@njit(cache=True, nogil=True)
def _split(data: np.ndarray, line_chars: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The words of the lines (byte ranges in data, the spaces left out), how many each line has
    (`line.split(" ")`, and none for an empty line), and which lines hold a literal "▁"."""
    starts = np.empty(len(data) + len(line_chars), dtype=np.int64)
    ends = np.empty_like(starts)
    line_words = np.zeros(len(line_chars), dtype=np.int64)
    meta_symbol = np.zeros(len(line_chars), dtype=np.bool_)
    words = 0
    position = 0
    for line in range(len(line_chars)):
        line_end = position
        for _ in range(line_chars[line]):
            line_end += SEQUENCE_BYTES[data[line_end]]
        if line_end == position:
            continue
        first = words
        starts[words] = position
        for byte in range(position, line_end):
            if data[byte] == 0x20:
                ends[words] = byte
                words += 1
                starts[words] = byte + 1
            elif data[byte] == 0xE2 and byte + 2 < line_end and data[byte + 1] == 0x96 and data[byte + 2] == 0x81:
                meta_symbol[line] = True
        ends[words] = line_end
        words += 1
        line_words[line] = words - first
        position = line_end
    return starts[:words], ends[:words], line_words, meta_symbol


@njit(cache=True, nogil=True)
def _leading_bytes(keys: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The first eight bytes of each key as one number that sorts as they do (zeros after a short key)."""
    leading = np.zeros(len(starts), dtype=np.uint64)
    for index in range(len(starts)):
        value = np.uint64(0)
        for offset in range(8):
            byte = keys[starts[index] + offset] if offset < lengths[index] else 0
            value = (value << np.uint64(8)) | np.uint64(byte)
        leading[index] = value
    return leading


@njit(cache=True, nogil=True)
def _look_up(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, rows: np.ndarray, keys: np.ndarray,
             words: int, key_bytes: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Each word's row, adding the new ones (their keys each followed by a space; their rows come
    back as pending, once each), and the cache's new word and key byte counts."""
    mask = len(rows) - 1
    row_of = np.empty(len(starts), dtype=np.int64)
    pending = np.empty(len(starts), dtype=np.int64)
    new = 0
    for word in range(len(starts)):
        start, length = starts[word], ends[word] - starts[word]
        value = _key_code(data, start, length)
        row = _slot(value, mask)
        while True:
            if rows[row, _KEY_LENGTH] == EMPTY:
                rows[row, _HASH], rows[row, _KEY_START], rows[row, _KEY_LENGTH] = value, key_bytes, length
                keys[key_bytes:key_bytes + length] = data[start:start + length]
                keys[key_bytes + length] = 0x20
                key_bytes += length + 1
                words += 1
                pending[new] = row
                new += 1
                break
            if rows[row, _HASH] == value and rows[row, _KEY_LENGTH] == length and (
                    length <= _PACKED or _same(data, start, keys, rows[row, _KEY_START], length)):
                break
            row = (row + 1) & mask
        row_of[word] = row
    return row_of, pending[:new], words, key_bytes


@njit(cache=True, nogil=True)
def _key_code(data: np.ndarray, start: int, length: int) -> int | np.int64:
    """A word of up to _PACKED bytes packed into a number with its length (equal numbers: equal
    words, so its bytes need no comparing); a longer one's FNV-1a hash, from 2**62 up."""
    if length <= _PACKED:
        code = length
        for position in range(start, start + length):
            code = (code << 8) | data[position]
        return code
    value = np.uint64(14695981039346656037)
    for position in range(start, start + length):
        value = (value ^ np.uint64(data[position])) * np.uint64(1099511628211)
    return np.int64((value >> np.uint64(2)) | np.uint64(1 << 62))


@njit(cache=True, nogil=True)
def _slot(code: int | np.int64, mask: int) -> np.int64:
    """Where a word's probe starts: the high bits of its code times the golden ratio."""
    return np.int64((np.uint64(code) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask


@njit(cache=True, nogil=True)
def _same(data: np.ndarray, start: int, keys: np.ndarray, key_start: int, length: int) -> bool:
    for offset in range(length):  # noqa: SIM110 - numba compiles the loop; all() of a generator it does not
        if data[start + offset] != keys[key_start + offset]:
            return False
    return True


@njit(cache=True, nogil=True)
def _rehash(rows: np.ndarray, floats: np.ndarray, grown: np.ndarray, grown_floats: np.ndarray) -> None:
    """Put the words of `rows` (and their floats) in the empty, larger table `grown` (a power of
    two rows)."""
    mask = len(grown) - 1
    for row in range(len(rows)):
        if rows[row, _KEY_LENGTH] != EMPTY:
            target = _slot(rows[row, _HASH], mask)
            while grown[target, _KEY_LENGTH] != EMPTY:
                target = (target + 1) & mask
            grown[target] = rows[row]
            grown_floats[target] = floats[row]


@njit(cache=True, nogil=True)
def _group_ends(keys: np.ndarray, size: int) -> np.ndarray:
    """Where lines of about `size` bytes of whole keys end (after a key's space)."""
    ends = []
    last = 0
    for position in range(len(keys)):
        if keys[position] == 0x20 and position + 1 - last >= size:
            ends.append(position + 1)
            last = position + 1
    if last < len(keys):
        ends.append(len(keys))
    return np.array(ends, dtype=np.int64)


@njit(cache=True, nogil=True)
def _align(flat: np.ndarray, piece_bytes: np.ndarray, rows: np.ndarray, pending: np.ndarray, id_start: int) -> bool:
    """Give each pending word (in the order encoded) its ids: those whose pieces, one after the
    other, cover "▁" + the word; False where a piece runs over a word's end."""
    token = 0
    for row in pending:
        need = 3 + rows[row, _KEY_LENGTH]  # "▁" is three bytes
        rows[row, _ID_START] = id_start + token
        covered = 0
        while covered < need and token < len(flat):
            length = piece_bytes[flat[token]] if flat[token] < len(piece_bytes) else -1
            if length < 0:
                return False
            covered += length
            token += 1
        if covered != need:
            return False
        rows[row, _ID_LENGTH] = id_start + token - rows[row, _ID_START]
    return token == len(flat)


@njit(cache=True, nogil=True)
def _assemble(row_of: np.ndarray, line_words: np.ndarray, meta_symbol: np.ndarray, rows: np.ndarray,
              floats: np.ndarray, ids: np.ndarray, piece_chars: np.ndarray,
              piece_byte: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lines' ids end to end, from their words', their character spans, how many each line
    has, and which lines are unsure: one holds a literal "▁", or a word without ids, or a word
    after a line score lower than its sure_before. A piece covers the characters it stands for
    ("▁": the space before the word; none for a line's first, the dummy prefix), a byte piece
    the character its byte belongs to, and a lone dummy "▁" the line's first character."""
    counts = np.zeros(len(line_words), dtype=np.int64)
    unsure = meta_symbol.copy()
    word = 0
    for line in range(len(line_words)):
        before = 0.0
        for _ in range(line_words[line]):
            row = row_of[word]
            counts[line] += max(rows[row, _ID_LENGTH], 0)
            unsure[line] |= -before >= floats[row, _SURE_BEFORE]
            before += floats[row, _SCORE]
            word += 1
    flat = np.empty(counts.sum(), dtype=np.int64)
    spans = np.empty((len(flat), 2), dtype=np.int64)
    position = word = 0
    for line in range(len(line_words)):
        chars = 0  # characters of the line begun so far
        for index in range(line_words[line]):
            row = row_of[word]
            word += 1
            start = rows[row, _ID_START]
            for offset in range(max(rows[row, _ID_LENGTH], 0)):
                token = ids[start + offset]
                flat[position] = token
                byte = piece_byte[token]
                if byte >= 0:
                    # A word's "▁" in bytes (a model without that piece) is not the space: spelled
                    # apart, as tokenmill.evaluation.spelling would not prove it either.
                    unsure[line] |= offset == 0
                    chars += byte & 0xC0 != 0x80  # a character begins at this byte
                    spans[position, 0], spans[position, 1] = chars - 1, chars
                else:
                    width = piece_chars[token] - (index == 0 and offset == 0)  # the dummy prefix
                    spans[position, 0], spans[position, 1] = chars, chars + max(width, 1)
                    chars += width
                position += 1
    return flat, spans, counts, unsure
