"""Plain-Python references of evaluation's and word counting's compiled (numba) kernels.

One function per kernel, each the rule its kernel implements written the slow, obvious way:
no numpy, no tables shared with the kernel, no cleverness. They are what
tests/unit/test_evaluation_kernels_against_references.py compares the kernels with on random
inputs, so that a kernel can be changed (made faster) and shown to keep its rule. If a kernel's
rule is meant to change, change its reference here first, then the kernel.

Not a test module (no `test_` prefix): nothing here is collected.
"""

import heapq
import math
import struct
from collections.abc import Callable, Sequence

import regex

# --- tokenmill.evaluation.utf8 ----------------------------------------------------------------


def sequence_bytes(lead: int) -> int:
    """Mirrors `tokenmill.evaluation.utf8.SEQUENCE_BYTES`: a UTF-8 sequence takes as many bytes as
    its first byte has leading one bits (one if none), a continuation byte (one leading one) reading
    as 2 and anything past four ones as 4."""
    ones = 0
    while ones < 8 and lead & (0x80 >> ones):
        ones += 1
    return 1 if ones == 0 else min(max(ones, 2), 4)


# --- tokenmill.corpora.words ------------------------------------------------------------------

# Letters, marks and digits of the scripts written without spaces, by Unicode property (the
# definition `tokenmill.corpora.words.NO_SPACE_RANGES` tabulates, bridging unassigned gaps).
_NO_SPACE_SCRIPTS = ("Han", "Hiragana", "Katakana", "Bopomofo", "Yi", "Thai", "Lao", "Khmer", "Myanmar", "Tibetan")
_NO_SPACE = regex.compile(
    "[[[" + "".join(rf"\p{{sc={name}}}" for name in _NO_SPACE_SCRIPTS) + "][["
    + "".join(rf"\p{{scx={name}}}" for name in _NO_SPACE_SCRIPTS) + r"]--\p{scx=Latin}]]&&[\p{L}\p{M}\p{N}]]",
    regex.V1)


def _no_space(character: str) -> bool:
    return _NO_SPACE.match(character) is not None


def _clings(character: str) -> bool:
    return not character.isspace() and not character.isalnum()


def scan_words(text: str) -> tuple[list[tuple[int, int]], bool]:
    """Mirrors `tokenmill.corpora.words._scan` (`scan_words`): left to right, at each character other
    than whitespace, a word is a no-space character with the runs of clinging (neither alnum nor
    space) characters before and after it, else a run of characters neither whitespace nor
    no-space, else that one character; and whether any character is of a no-space script."""
    spans = []
    i = 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        end = i
        while end < len(text) and _clings(text[end]):
            end += 1
        if end < len(text) and _no_space(text[end]):
            end += 1
            while end < len(text) and _clings(text[end]):
                end += 1
        else:
            end = i
            while end < len(text) and not text[end].isspace() and not _no_space(text[end]):
                end += 1
            end = max(end, i + 1)
        spans.append((i, end))
        i = end
    return spans, any(_no_space(character) for character in text)


# --- tokenmill.evaluation.metrics -------------------------------------------------------------


def count_inside(ids: Sequence[int], counts: Sequence[int]) -> tuple[list[int], int]:
    """Mirrors `tokenmill.evaluation.metrics._count_inside`: each id inside 0..len(counts) - 1 adds
    one to its count; returns the new counts and how many ids were outside."""
    new = list(counts)
    outside = 0
    for token in ids:
        if 0 <= token < len(new):
            new[token] += 1
        else:
            outside += 1
    return new, outside


def continued_words(words: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]], line_tokens: Sequence[int],
                    starts: Sequence[int], lengths: Sequence[int]) -> int:
    """Mirrors `tokenmill.evaluation.metrics.continued_words`: how many words [ws, we) two or more
    tokens overlap (s < we and e > ws), a token's [s, e) being its span clipped to its line and
    shifted by where the line starts."""
    tokens = []
    token = 0
    for line, count in enumerate(line_tokens):
        for _ in range(count):
            start, end = spans[token]
            clip = lambda position, line=line: starts[line] + min(max(position, 0), lengths[line])  # noqa: E731
            tokens.append((clip(start), clip(end)))
            token += 1
    return sum(sum(start < word_end and end > word_start for start, end in tokens) >= 2
               for word_start, word_end in words)


# --- tokenmill.evaluation.spelling ------------------------------------------------------------


def _character_of_bytes(line: str) -> list[int]:
    """For each UTF-8 byte of a line, the index of the character it belongs to."""
    return [index for index, character in enumerate(line) for _ in character.encode("utf-8", "surrogatepass")]


def spell_bytes(lines: Sequence[str], ids: Sequence[Sequence[int]], pieces: Sequence[bytes | None],
                dummy_prefix: bool) -> tuple[list[bool], list[list[tuple[int, int]]]]:
    """Mirrors `tokenmill.evaluation.spelling._spell_bytes` (`Spelling.check`): a line is spelled when
    every id stands for bytes (a non-empty piece) and they, end to end, are the line's UTF-8 bytes,
    after a space in front of a non-empty line with `dummy_prefix`; a spelled line's token spans the
    characters holding its bytes (a lone dummy space: the first character), others (0, 0)."""
    spelled, spans = [], []
    for line, line_ids in zip(lines, ids):
        known = all(0 <= token < len(pieces) and pieces[token] for token in line_ids)
        dummy = b" " if dummy_prefix and line else b""
        text = line.encode("utf-8", "surrogatepass")
        ok = known and b"".join(pieces[token] or b"" for token in line_ids) == dummy + text
        spelled.append(ok)
        if not ok:
            spans.append([(0, 0)] * len(line_ids))
            continue
        owner = [-1] * len(dummy) + _character_of_bytes(line)  # -1: the dummy space, no character
        position, line_spans = 0, []
        for token in line_ids:
            size = len(pieces[token] or b"")
            held = [owner[byte] for byte in range(position, position + size) if owner[byte] >= 0]
            line_spans.append((min(held), max(held) + 1) if held else (0, 1))
            position += size
        spans.append(line_spans)
    return spelled, spans


def _white_space(character: str) -> bool:
    """Unicode's White_Space, which `tokenizers`' whitespace pre-tokenizers drop."""
    return regex.match(r"\p{White_Space}", character) is not None


def spell_words(lines: Sequence[str], ids: Sequence[Sequence[int]], pieces: Sequence[str | None],
                glued: Sequence[bool], continuing: Sequence[bool]
                ) -> tuple[list[bool], list[bool], list[list[tuple[int, int]]]]:
    """Mirrors `tokenmill.evaluation.spelling._spell_words` (`WordPieceSpelling.check`): a line is
    spelled when it reads as whitespace, then each id's (non-empty) characters in turn each after a
    run of whitespace, then whitespace; it round-trips when spelled with no whitespace at either
    end, nothing before a glued token, exactly one " " before any other, its first token not a
    continuing piece, and tokens unless it is empty; spans are each token's characters ((0, 0) if
    not spelled)."""
    spelled, roundtrips, spans = [], [], []
    for line, line_ids in zip(lines, ids):
        position, gaps, line_spans, ok = 0, [], [], True
        for token in line_ids:
            piece = pieces[token] if 0 <= token < len(pieces) else None
            if not piece:
                ok = False
                break
            gap = position
            while position < len(line) and _white_space(line[position]):
                position += 1
            if line[position:position + len(piece)] != piece:
                ok = False
                break
            gaps.append(line[gap:position])
            line_spans.append((position, position + len(piece)))
            position += len(piece)
        tail = line[position:]
        ok = ok and all(_white_space(character) for character in tail)
        back = ok and tail == "" and (bool(line_ids) or line == "")
        for index, (token, gap) in enumerate(zip(line_ids, gaps) if ok else ()):
            if index == 0:
                back = back and gap == "" and not continuing[token]
            else:
                back = back and gap == ("" if glued[token] else " ")
        spelled.append(ok)
        roundtrips.append(back)
        spans.append(line_spans if ok else [(0, 0)] * len(line_ids))
    return spelled, roundtrips, spans


# --- tokenmill.evaluation.unigram -------------------------------------------------------------

UNKNOWN_PENALTY = 10.0
MAX_WORD = 256
SAFETY = 4.0
UNIT_ROUNDOFF = 2.0 ** -24


def float32(value: float) -> float:
    """`value` rounded to the nearest float32."""
    return float(struct.unpack("f", struct.pack("f", value))[0])


def trie_breadth_first(keys: dict[bytes, int]) -> tuple[list[int], list[int], list[int], list[int]]:
    """Mirrors `tokenmill.evaluation.unigram._breadth_first`: the byte trie of the keys (non-empty,
    key -> id), its nodes numbered breadth first from the root with each node's children in byte
    order; per node its first child's number (0 if none), its number of children, the byte leading
    to it (0 for the root) and the id of the key ending there (-1)."""
    prefixes = {key[:depth] for key in keys for depth in range(len(key) + 1)}
    order, queue = [], [b""]
    while queue:
        node = queue.pop(0)
        order.append(node)
        queue += sorted((prefix for prefix in prefixes if len(prefix) == len(node) + 1 and prefix[:-1] == node),
                        key=lambda prefix: prefix[-1])
    number = {node: index for index, node in enumerate(order)}
    children = [[prefix for prefix in order if len(prefix) == len(node) + 1 and prefix[:-1] == node] for node in order]
    return ([number[kids[0]] if kids else 0 for kids in children], [len(kids) for kids in children],
            [node[-1] if node else 0 for node in order], [keys.get(node, -1) for node in order])


def trie_piece(keys: dict[bytes, int], key: bytes) -> int:
    """Mirrors `tokenmill.evaluation.unigram._double_array` (read by walking its units): the id of
    the piece a byte string is, -1 if it is none."""
    return keys.get(key, -1)


def best_path(word: str, normal: dict[str, tuple[int, float]], unknown_score: float,
              byte_ids: Sequence[int]) -> tuple[list[int], float, float]:
    """Mirrors `tokenmill.evaluation.unigram.best_path`: sentencepiece's Viterbi over "▁" + word,
    each NORMAL piece matching at a character an edge of its score, and a character no piece is
    exactly an unknown edge (unknown_score, written as its bytes' byte ids); the path of highest
    left-to-right sum wins, an earlier start of the last piece on equal sums (recursively);
    returns its ids, its score and its lead over the second best path's (inf if none)."""
    text = "\u2581" + word
    size = len(text)
    best: list[float | None] = [0.0] + [None] * size
    came: list[tuple[int, int] | None] = [None] * (size + 1)  # (start, id; -1: unknown)
    top: list[list[float]] = [[0.0]] + [[] for _ in range(size)]  # the two best sums of paths ending here
    for start in range(size):
        edges = [(end, *normal[text[start:end]]) for end in range(start + 1, size + 1) if text[start:end] in normal]
        if text[start] not in normal:
            edges.append((start + 1, -1, unknown_score))
        for end, piece, score in edges:
            total = best[start] + score
            if best[end] is None or total > best[end]:
                best[end], came[end] = total, (start, piece)
            top[end] = heapq.nlargest(2, top[end] + [sum_ + score for sum_ in top[start]])
    ids, end = [], size
    while end > 0:
        start, piece = came[end]
        ids[:0] = [piece] if piece >= 0 else [byte_ids[byte] for byte in text[start:end].encode("utf-8")]
        end = start
    return ids, best[size], top[size][0] - top[size][1] if len(top[size]) > 1 else math.inf


def sure_before(margin: float, score: float, length: int) -> float:
    """Mirrors `tokenmill.evaluation.unigram.sure_before`: the most a line's |score| before a word
    may be for float32 rounding (each of 2 (length + 2) sums off by at most a unit roundoff,
    SAFETY times over) not to close the word's margin: margin / (SAFETY · 2 (length + 2) · u) -
    |score| - margin, inf when there is no second path."""
    if margin == math.inf:
        return math.inf
    return margin / (SAFETY * 2.0 * (length + 2) * UNIT_ROUNDOFF) - abs(score) - margin


def segment_words(words: Sequence[str], normal: dict[str, tuple[int, float]], unknown_score: float,
                  byte_ids: Sequence[int]) -> list[tuple[list[int] | None, float, float]]:
    """Mirrors `tokenmill.evaluation.unigram._segment_words` (`segment_words`): each word's best
    path's ids, score and `sure_before` (over its bytes + 3 for "▁"); a word of more than MAX_WORD
    bytes gets no ids, score 0 and sure_before 0 (left to sentencepiece)."""
    out: list[tuple[list[int] | None, float, float]] = []
    for word in words:
        length = len(word.encode("utf-8"))
        if length > MAX_WORD:
            out.append((None, 0.0, 0.0))
            continue
        ids, score, margin = best_path(word, normal, unknown_score, byte_ids)
        out.append((ids, score, sure_before(margin, score, length + 3)))
    return out


# --- tokenmill.evaluation.word_cache ----------------------------------------------------------


def split_words(lines: Sequence[str]) -> tuple[list[tuple[int, int]], list[int], list[bool]]:
    """Mirrors `tokenmill.evaluation.word_cache._split`: the words of the lines, `line.split(" ")`
    (none for an empty line), as byte ranges in the lines' UTF-8 end to end; how many each line
    has; whether each line holds a literal "▁"."""
    ranges, counts, meta = [], [], []
    offset = 0
    for line in lines:
        words = line.split(" ") if line else []
        position = offset
        for word in words:
            size = len(word.encode("utf-8", "surrogatepass"))
            ranges.append((position, position + size))
            position += size + 1
        counts.append(len(words))
        meta.append("\u2581" in line)
        offset += len(line.encode("utf-8", "surrogatepass"))
    return ranges, counts, meta


def leading_bytes(key: bytes) -> int:
    """Mirrors `tokenmill.evaluation.word_cache._leading_bytes`: a key's first eight bytes, zeros
    after a shorter key, read as one big-endian number (so numbers sort as the keys' starts do)."""
    return int.from_bytes(key[:8].ljust(8, b"\0"), "big")


PACKED = 7
_MASK64 = (1 << 64) - 1


def key_code(word: bytes) -> int:
    """Mirrors `tokenmill.evaluation.word_cache._key_code`: a word of at most 7 bytes is its length
    then its bytes as one big-endian number; a longer one is its 64-bit FNV-1a hash shifted right
    by two with bit 62 set."""
    if len(word) <= PACKED:
        return int.from_bytes(bytes([len(word)]) + word, "big")
    value = 14695981039346656037
    for byte in word:
        value = ((value ^ byte) * 1099511628211) & _MASK64
    return (value >> 2) | (1 << 62)


def slot(code: int, mask: int) -> int:
    """Mirrors `tokenmill.evaluation.word_cache._slot`: bits 32 and up of the code times the 64-bit
    golden ratio (mod 2**64), masked."""
    return ((code * 0x9E3779B97F4A7C15) & _MASK64) >> 32 & mask


def look_up(batches: Sequence[Sequence[bytes]]) -> list[tuple[list[int], list[int]]]:
    """Mirrors `tokenmill.evaluation.word_cache._look_up` (with `_same` and `_rehash`): batch after
    batch, each word's number among the distinct words seen so far (numbered as first seen), and the
    numbers of the words new in the batch, in order. Their keys are the words, each with a space
    after, end to end in that order (`look_up_keys`)."""
    seen: dict[bytes, int] = {}
    out = []
    for batch in batches:
        numbers, new = [], []
        for word in batch:
            if word not in seen:
                seen[word] = len(seen)
                new.append(seen[word])
            numbers.append(seen[word])
        out.append((numbers, new))
    return out


def look_up_keys(batches: Sequence[Sequence[bytes]]) -> bytes:
    """The keys `look_up`'s words leave in the cache: each distinct word and a space, as first seen."""
    return b"".join(word + b" " for word in dict.fromkeys(word for batch in batches for word in batch))


def group_ends(keys: bytes, size: int) -> list[int]:
    """Mirrors `tokenmill.evaluation.word_cache._group_ends`: cut after a space wherever the group
    since the last cut has reached `size` bytes, and at the end if anything is left."""
    ends, last = [], 0
    for position, byte in enumerate(keys):
        if byte == 0x20 and position + 1 - last >= size:
            ends.append(position + 1)
            last = position + 1
    if last < len(keys):
        ends.append(len(keys))
    return ends


def align(flat: Sequence[int], piece_bytes: Sequence[int], word_lengths: Sequence[int]) -> list[tuple[int, int]] | None:
    """Mirrors `tokenmill.evaluation.word_cache._align`: words in order take the run of tokens whose
    byte lengths add up to exactly 3 ("▁") + the word's length; (first token, how many) per word,
    or None if a token's length is unknown (-1, or an id past the table), a run overshoots or runs
    out, or tokens are left over."""
    runs, token = [], 0
    for length in word_lengths:
        first, covered = token, 0
        while covered < 3 + length and token < len(flat):
            size = piece_bytes[flat[token]] if flat[token] < len(piece_bytes) else -1
            if size < 0:
                return None
            covered += size
            token += 1
        if covered != 3 + length:
            return None
        runs.append((first, token - first))
    return runs if token == len(flat) else None


Segment = Callable[[str], tuple[list[int] | None, float, float]]


def cache_lines(lines: Sequence[str], segment: Segment, pieces: Sequence[bytes | None],
                byte_ids: frozenset[int]) -> tuple[list[int], list[int], list[tuple[int, int]], list[bool]]:
    """Mirrors `tokenmill.evaluation.word_cache._assemble` (what `WordCache.encode` gives): a line's
    ids are its words' (`line.split(" ")`, none for an empty line; `segment` gives a word's ids,
    None if it has none, its score and sure_before), end to end. A token spans the line characters
    its bytes stand for in "▁" + the line with spaces as "▁" (the first "▁" stands for none: a
    token of only that spans the first character). A line is unsure when it holds a literal "▁", a
    word has no ids, a word's first id is a byte piece, or a word's sure_before is at most minus
    the sum of the scores of the words before it."""
    flat, counts, spans, unsure = [], [], [], []
    for line in lines:
        words = line.split(" ") if line else []
        owner = [-1] * 3 + [index for index, character in enumerate(line)
                            for _ in ("\u2581" if character == " " else character).encode("utf-8", "surrogatepass")]
        before, doubtful, line_ids = 0.0, "\u2581" in line, []
        for word in words:
            ids, score, limit = segment(word)
            doubtful |= ids is None or -before >= limit or (bool(ids) and ids[0] in byte_ids)
            before += score
            line_ids += ids or []
        position = 0
        for token in line_ids:
            piece = pieces[token] or b""
            size = 1 if token in byte_ids else len(piece) + 2 * piece.count(b" ")  # "▁": three bytes
            held = [owner[byte] for byte in range(position, min(position + size, len(owner))) if owner[byte] >= 0]
            spans.append((min(held), max(held) + 1) if held else (0, 1))
            position += size
        flat += line_ids
        counts.append(len(line_ids))
        unsure.append(doubtful)
    return flat, counts, spans, unsure
