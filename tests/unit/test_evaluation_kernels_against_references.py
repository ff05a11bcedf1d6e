"""Evaluation's and word counting's compiled kernels equal their plain-Python references
(tests/unit/evaluation_kernel_references.py) on random inputs.

Each test draws one case per seed (seeded `random.Random`: the same cases every run) of small
inputs mixing scripts: ASCII, accented Latin, combining marks, CJK and kana, Thai, Devanagari,
emoji, whitespace of several kinds and a literal "▁". Kernel and reference must agree exactly
(floats too: both add the same float64 numbers in the same order). On a disagreement the case is
shrunk (parts and characters dropped while it still fails) and the smallest one is shown, with
its seed. Under NUMBA_DISABLE_JIT=1 the kernels run as Python, which these tests also hold.
"""

import functools
import math
import random
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
import regex
import sentencepiece
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from tests.unit import evaluation_kernel_references as reference
from tokenmill.corpora.words import _WORD, code_points, scan_words, utf8_lines
from tokenmill.evaluation import word_cache
from tokenmill.evaluation.metrics import _count_inside, continued_words
from tokenmill.evaluation.spelling import Spelling, WordPieceSpelling
from tokenmill.evaluation.unigram import MAX_WORD, Pieces, _breadth_first, segment_words, sure_before
from tokenmill.evaluation.utf8 import SEQUENCE_BYTES

SEEDS = range(200)
FEW_SEEDS = range(120)  # for the cases that build a model and a sentencepiece processor

Piece = model_pb2.ModelProto.SentencePiece

# --- random text ------------------------------------------------------------------------------

POOLS = {
    "ascii": list("abcdeftxyz0129"),
    "punctuation": list(".,!?'-_()\"#"),
    "latin": list("éñüßøÅçà"),
    "marks": ["\u0301", "\u0303", "\u0308"],
    "cjk": list("東京語日本人。「」、"),
    "kana": list("はをコーヒしカ"),
    "thai": [*"ภาษไทยง", "\u0e48", "\u0e35", "\u0e31"],
    "devanagari": [*"नमसतहद", "\u094d", "\u093e", "\u093f", "\u0902"],
    "emoji": ["👋", "🏽", "\u200d", "👩", "🎉", "🇫", "🇷"],
    "meta": ["\u2581"],
}
SPACES = [" ", " ", " ", "\t", "\xa0", "\u3000", "\u2028", "\x1c", "\u2009", "\x85"]


def random_text(rng: random.Random, most: int, spaces: list[str] | None = SPACES) -> str:
    """Up to `most` characters from a few of the pools (and `spaces`, if any)."""
    pools = [POOLS[name] for name in rng.sample(sorted(POOLS), rng.randint(1, 4))] + ([spaces] if spaces else [])
    return "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(0, most)))


# --- comparing and shrinking ------------------------------------------------------------------


def _smaller(value: Any) -> Iterator[Any]:
    """Values one step smaller: parts of a list, string or bytes dropped (halves first), or one
    part of a list or tuple made smaller (a tuple keeps its length)."""
    if isinstance(value, (str, bytes, list)):
        width = len(value) // 2
        while width >= 1:
            for start in range(0, len(value), width):
                yield value[:start] + value[start + width:]
            width //= 2
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            for part in _smaller(item):
                yield value[:index] + type(value)([part]) + value[index + 1:]


def _problem(check: Callable[[Any, Any], str | None], context: Any, items: Any) -> str | None:
    try:
        return check(context, items)
    except Exception as error:  # a kernel (or reference) that raises disagrees too
        return f"raised {error!r}"


def shrink(check: Callable[[Any, Any], str | None], context: Any, items: Any, budget: int = 3000) -> Any:
    """The smallest items (greedily) on which `check` still finds a problem."""
    while budget > 0:
        for candidate in _smaller(items):
            budget -= 1
            if _problem(check, context, candidate) is not None:
                items = candidate
                break
            if budget <= 0:
                break
        else:
            break
    return items


def holds(generate: Callable[[random.Random], tuple[Any, Any]], check: Callable[[Any, Any], str | None],
          seeds: range = SEEDS) -> None:
    """For each seed a case (context, items) from `generate`; `check` says how kernel and reference
    disagree on it, or None. Fails with the smallest items found for the first seed that disagrees."""
    for seed in seeds:
        context, items = generate(random.Random(seed))
        if _problem(check, context, items) is None:
            continue
        smallest = shrink(check, context, items)
        shown = describe(context)
        pytest.fail(f"seed {seed}: {_problem(check, context, smallest)}\nsmallest failing input: {smallest!r}\n"
                    f"context: {shown if len(shown) < 3000 else shown[:3000] + '...'}", pytrace=False)


def describe(context: Any) -> str:
    """A case's context for a failure message: a sentencepiece model as its kind and NORMAL pieces."""
    if isinstance(context, model_pb2.ModelProto):
        kind = model_pb2.TrainerSpec.ModelType.Name(context.trainer_spec.model_type)
        normal = {i: (piece.piece, piece.score) for i, piece in enumerate(context.pieces) if piece.type == Piece.NORMAL}
        return f"{kind} model: byte pieces <0x00>..<0xFF> are ids 3..258; NORMAL pieces (id: piece, score) {normal}"
    return repr(context)


def differ(name: str, kernel: Any, expected: Any) -> str | None:
    return None if kernel == expected else f"{name}: kernel {kernel!r} != reference {expected!r}"


def first(*problems: str | None) -> str | None:
    return next((problem for problem in problems if problem is not None), None)


def pairs(array: np.ndarray) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in array.reshape(-1, 2).tolist()]


def span_array(spans: list[tuple[int, int]]) -> np.ndarray:
    return np.array(spans, dtype=np.int64).reshape(-1, 2)


# --- tokenmill.evaluation.utf8 ----------------------------------------------------------------


def test_utf8_sequence_bytes():
    assert [int(size) for size in SEQUENCE_BYTES] == [reference.sequence_bytes(lead) for lead in range(256)]
    # The reference is UTF-8's: a character's first byte tells its length (each length's first
    # and last code points, and a spread between).
    for code in [*range(0, 0x110000, 61), 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF]:
        encoded = chr(code).encode("utf-8", "surrogatepass")
        assert reference.sequence_bytes(encoded[0]) == len(encoded), hex(code)


# --- tokenmill.corpora.words ------------------------------------------------------------------


def _scan_case(rng: random.Random) -> tuple[None, str]:
    return None, random_text(rng, 24, [*SPACES, "\n"])


def _check_scan(_: None, text: str) -> str | None:
    spans, saw = scan_words(code_points(text))
    return differ("word spans, saw no-space", (pairs(spans), bool(saw)), reference.scan_words(text))


def test_word_scan():
    holds(_scan_case, _check_scan, range(300))


def test_word_scan_reference_is_the_modules_regex():
    """The reference reads as the rule's own definition, `tokenmill.corpora.words._WORD`."""
    holds(_scan_case, lambda _, text: differ("regex, reference", [match.span() for match in _WORD.finditer(text)],
                                             reference.scan_words(text)[0]), range(300))


# --- tokenmill.evaluation.metrics -------------------------------------------------------------


def _count_case(rng: random.Random) -> tuple[list[int], list[int]]:
    size = rng.randint(0, 8)
    return [rng.randint(0, 5) for _ in range(size)], [rng.randint(-3, size + 3) for _ in range(rng.randint(0, 20))]


def _check_count(counts: list[int], ids: list[int]) -> str | None:
    kernel_counts = np.array(counts, dtype=np.int64)
    outside = _count_inside(np.array(ids, dtype=np.int64), kernel_counts)
    return differ("counts, outside", (kernel_counts.tolist(), int(outside)), reference.count_inside(ids, counts))


def test_count_inside():
    holds(_count_case, _check_count)


def _continued_case(rng: random.Random) -> tuple[None, list]:
    lines = []
    for _ in range(rng.randint(0, 5)):
        length, words, position = rng.randint(0, 12), [], 0
        while True:
            position += rng.randint(0, 2)
            end = position + rng.randint(1, 4)
            if end > length:
                break
            words.append((position, end))
            position = end
        tokens = []
        for _ in range(rng.randint(0, 6)):
            if words and rng.random() < 0.5:  # cut a word, or cover several
                start = rng.choice(words)[0] + rng.randint(-1, 2)
            else:
                start = rng.randint(-2, length + 2)
            tokens.append((start, start + rng.randint(0, 5)))
        lines.append((length, words, tokens))
    return None, lines


def _check_continued(_: None, lines: list) -> str | None:
    lengths = [length for length, _, _ in lines]
    starts = [sum(size + 1 for size in lengths[:line]) for line in range(len(lines))]  # lines joined by newlines
    words = [(start + a, start + b) for start, (_, line_words, _) in zip(starts, lines) for a, b in line_words]
    spans = [span for _, _, tokens in lines for span in tokens]
    line_tokens = [len(tokens) for _, _, tokens in lines]
    kernel = continued_words(span_array(words), span_array(spans), np.array(line_tokens, dtype=np.int64),
                             np.array(starts, dtype=np.int64), np.array(lengths, dtype=np.int64))
    return differ("continued words", int(kernel), reference.continued_words(words, spans, line_tokens, starts, lengths))


def test_continued_words():
    holds(_continued_case, _check_continued)


# --- tokenmill.evaluation.spelling ------------------------------------------------------------


def _perturbed(rng: random.Random, ids: list[int], vocabulary: int) -> list[int]:
    """`ids`, or (a third of the time) with one id replaced, dropped, added or two swapped."""
    ids = list(ids)
    change = rng.randrange(6)
    if change == 0 and ids:
        ids[rng.randrange(len(ids))] = rng.randrange(vocabulary + 2)  # past the table too
    elif change == 1 and ids:
        del ids[rng.randrange(len(ids))]
    elif change == 2:
        ids.insert(rng.randint(0, len(ids)), rng.randrange(vocabulary))
    elif change == 3 and len(ids) > 1:
        a, b = rng.sample(range(len(ids)), 2)
        ids[a], ids[b] = ids[b], ids[a]
    return ids


def _cuts(rng: random.Random, size: int) -> list[tuple[int, int]]:
    """[start, end) ranges cutting 0..size at random places."""
    inside = sorted(rng.sample(range(1, size), rng.randint(0, size - 1))) if size > 1 else []
    return list(pairwise([0, *inside, size])) if size else []


def _spell_bytes_case(rng: random.Random) -> tuple[tuple[list[bytes | None], bool], list]:
    dummy = rng.random() < 0.5
    pieces: list[bytes | None] = [None, b""]  # ids that stand for no fixed bytes
    known: dict[bytes, int] = {}

    def piece_id(piece: bytes) -> int:
        if piece not in known:
            known[piece] = len(pieces)
            pieces.append(piece)
        return known[piece]

    rows = []
    for _ in range(rng.randint(0, 6)):
        line = random_text(rng, 12)
        target = (b" " if dummy and line else b"") + line.encode()
        # Cut anywhere, inside characters too (byte pieces), and sometimes at a lone dummy space.
        ids = [piece_id(target[a:b]) for a, b in _cuts(rng, len(target))]
        rows.append((line, ids))
    for _ in range(rng.randint(0, 3)):
        piece_id(random_text(rng, 3).encode())
    rows = [(line, _perturbed(rng, ids, len(pieces)) if rng.random() < 0.35 else ids) for line, ids in rows]
    return (pieces, dummy), rows


def _check_spell_bytes(context: tuple[list[bytes | None], bool], rows: list) -> str | None:
    pieces, dummy = context
    lines, ids = [line for line, _ in rows], [line_ids for _, line_ids in rows]
    flat = np.array([token for line_ids in ids for token in line_ids], dtype=np.int64)
    counts = np.array([len(line_ids) for line_ids in ids], dtype=np.int64)
    checked = Spelling.of(pieces, dummy_prefix=dummy).check(lines, flat, counts)
    spelled, spans = reference.spell_bytes(lines, ids, pieces, dummy)
    return first(differ("spelled", checked.spelled.tolist(), spelled),
                 differ("round trips", checked.roundtrips.tolist(), spelled),
                 differ("spans", pairs(checked.spans), [span for line in spans for span in line]))


def test_spell_bytes():
    holds(_spell_bytes_case, _check_spell_bytes)


WHITE = regex.compile(r"\p{White_Space}+")


def _spell_words_case(rng: random.Random) -> tuple[tuple[list[str | None], list[bool], list[bool]], list]:
    pieces: list[str | None] = [None, ""]
    glued, continuing = [False, False], [False, False]
    known: dict[str, int] = {}

    def piece_id(piece: str, later: bool) -> int:
        if piece not in known:
            known[piece] = len(pieces)
            pieces.append(piece)
            # Mostly as a WordPiece decoder has them: later pieces of a word glued on and "##".
            glued.append(rng.random() < (0.9 if later else 0.1))
            continuing.append(rng.random() < (0.9 if later else 0.05))
        return known[piece]

    rows = []
    for _ in range(rng.randint(0, 6)):
        words = [random_text(rng, 6, spaces=None) for _ in range(rng.randint(0, 4))]
        separators = [rng.choice([" "] * 12 + ["", "  ", "\t", "\u3000", "\x1c", "\xa0", "\u2028"]) for _ in words]
        line = "".join(separator + word for separator, word in zip(separators, words))
        line = line if rng.random() < 0.15 else line[len(separators[0]) if separators else 0:]  # no leading space
        line += rng.choice(["", "", "", "", "", " ", "\t"])
        ids = [piece_id(word[a:b], a > 0) for word in WHITE.split(line) for a, b in _cuts(rng, len(word))]
        rows.append((line, ids))
    for _ in range(rng.randint(0, 3)):
        piece_id(WHITE.sub("", random_text(rng, 3)), rng.random() < 0.5)
    rows = [(line, _perturbed(rng, ids, len(pieces)) if rng.random() < 0.35 else ids) for line, ids in rows]
    return (pieces, glued, continuing), rows


def _check_spell_words(context: tuple[list[str | None], list[bool], list[bool]], rows: list) -> str | None:
    pieces, glued, continuing = context
    lines, ids = [line for line, _ in rows], [line_ids for _, line_ids in rows]
    flat = np.array([token for line_ids in ids for token in line_ids], dtype=np.int64)
    checked = WordPieceSpelling.of_pieces(pieces, glued, continuing).check(
        lines, flat, np.array([len(i) for i in ids], dtype=np.int64))
    spelled, roundtrips, spans = reference.spell_words(lines, ids, pieces, glued, continuing)
    return first(differ("spelled", checked.spelled.tolist(), spelled),
                 differ("round trips", checked.roundtrips.tolist(), roundtrips),
                 differ("spans", pairs(checked.spans), [span for line in spans for span in line]))


def test_spell_words():
    holds(_spell_words_case, _check_spell_words)


# --- tokenmill.evaluation.unigram -------------------------------------------------------------

WORD_POOLS = [character for name in sorted(POOLS) for character in POOLS[name]] + ["\t", "\xa0"]


def random_model(rng: random.Random, model_type: int = model_pb2.TrainerSpec.UNIGRAM,
                 inner_meta: bool = False) -> model_pb2.ModelProto:
    """A sentencepiece model as Tokenmill trains them (identity rule, no extra whitespace removed,
    a dummy prefix, byte fallback): a few dozen NORMAL pieces cut from random text, "▁" in front of
    some (and inside a few, with `inner_meta`), with scores often tied."""
    texts = [random_text(rng, 8, spaces=None) for _ in range(5)]
    found: set[str] = set()
    for text in [text for text in texts if text] * 8:
        start = rng.randrange(len(text))
        piece = text[start:rng.randint(start + 1, min(len(text), start + 4))]
        found.add("\u2581" + piece if rng.random() < 0.4 else piece)
    found.update(rng.sample(WORD_POOLS, 6))
    if rng.random() < 0.7:
        found.add("\u2581")
    if inner_meta:
        found.update(("a\u2581b", "\u2581\u2581", "東\u2581"))
    else:  # as `tokenmill.evaluation.word_cache.applies` requires: "▁" only at a piece's start
        found = {piece for piece in found if "\u2581" not in piece[1:]}
    found.discard("")
    # Half the models tie often: few distinct scores, and pieces scoring what their halves do.
    tied = rng.random() < 0.5
    scores = {piece: rng.choice([-1.0, -2.0, -3.0]) if tied else rng.uniform(-12.0, -0.5) for piece in sorted(found)}
    for _ in range(10 if tied else 0):
        left, right = rng.sample(sorted(scores), 2)
        if inner_meta or not right.startswith("\u2581"):
            scores.setdefault(left + right, scores[left] + scores[right])
    model = model_pb2.ModelProto()
    model.trainer_spec.model_type = model_type
    model.trainer_spec.byte_fallback = True
    model.normalizer_spec.name = "identity"
    model.normalizer_spec.add_dummy_prefix = True
    model.normalizer_spec.remove_extra_whitespaces = False
    model.normalizer_spec.escape_whitespaces = True
    model.pieces.add(piece="<unk>", score=0.0, type=Piece.UNKNOWN)
    model.pieces.add(piece="<s>", score=0.0, type=Piece.CONTROL)
    model.pieces.add(piece="</s>", score=0.0, type=Piece.CONTROL)
    for byte in range(256):
        model.pieces.add(piece=f"<0x{byte:02X}>", score=0.0, type=Piece.BYTE)
    for piece, score in scores.items():
        model.pieces.add(piece=piece, score=score, type=Piece.NORMAL)
    model.trainer_spec.vocab_size = len(model.pieces)
    return model


def normal_pieces(model: model_pb2.ModelProto) -> dict[str, tuple[int, float]]:
    return {piece.piece: (i, piece.score) for i, piece in enumerate(model.pieces) if piece.type == Piece.NORMAL}


def unknown_score(model: model_pb2.ModelProto) -> float:
    """sentencepiece's: the lowest NORMAL piece score minus 10, in float32."""
    return reference.float32(min(score for _, score in normal_pieces(model).values()) - reference.UNKNOWN_PENALTY)


def byte_ids(model: model_pb2.ModelProto) -> list[int]:
    ids = [-1] * 256
    for i, piece in enumerate(model.pieces):
        if piece.type == Piece.BYTE:
            ids[int(piece.piece[3:5], 16)] = i
    return ids


def random_words(rng: random.Random, model: model_pb2.ModelProto, count: int) -> list[str]:
    """Words (no " ") made of the model's pieces and other characters, a few longer than MAX_WORD bytes."""
    texts = [piece.lstrip("\u2581") for piece in normal_pieces(model)]
    words = []
    for _ in range(count):
        if rng.random() < 0.03:
            words.append(rng.choice(["x", "東", "ab", "👋"]) * rng.randint(60, 300))
            continue
        parts = [rng.choice(texts) if rng.random() < 0.7 else rng.choice(WORD_POOLS) for _ in range(rng.randint(0, 5))]
        words.append("".join(parts))
    return words


def _trie_case(rng: random.Random) -> tuple[None, list[bytes]]:
    return None, sorted({random_text(rng, 5).encode() for _ in range(rng.randint(1, 25))} - {b""})


def _check_trie(_: None, keys: list[bytes]) -> str | None:
    keys = sorted(set(keys) - {b""})
    ids = {key: 10 + i for i, key in enumerate(keys)}
    ends = np.cumsum(np.array([len(key) for key in keys], dtype=np.int64))
    kernel = _breadth_first(np.frombuffer(b"".join(keys), dtype=np.uint8), ends,
                            np.array([ids[key] for key in keys], dtype=np.int64))
    return differ("first child, children, byte, piece", [part.tolist() for part in kernel],
                  list(reference.trie_breadth_first(ids)))


def test_trie_numbering():
    holds(_trie_case, _check_trie)


def walk(units: np.ndarray, key: bytes) -> int:
    """The piece a byte string leads to down the double array, -1 if none."""
    unit = 0
    for byte in key:
        child = units[unit, 0] + byte
        if units[unit, 0] <= 0 or child >= len(units) or units[child, 1] != unit:
            return -1
        unit = child
    return int(units[unit, 2])


def _double_array_case(rng: random.Random) -> tuple[Any, list[bytes]]:
    model = random_model(rng, inner_meta=rng.random() < 0.3)
    keys = [piece.encode() for piece in normal_pieces(model)]
    others = [key[:cut] for key in keys for cut in range(1, len(key))] + [key + b"a" for key in keys]
    others += [random_text(rng, 4).encode() for _ in range(20)]
    return model, keys + rng.sample(others, min(len(others), 40))


def _check_double_array(model: Any, keys: list[bytes]) -> str | None:
    units = Pieces.of(model).units
    pieces = {piece.encode(): i for piece, (i, _) in normal_pieces(model).items()}
    return differ("pieces found", [walk(units, key) for key in keys],
                  [reference.trie_piece(pieces, key) for key in keys])


def test_double_array_holds_exactly_the_pieces():
    holds(_double_array_case, _check_double_array, FEW_SEEDS)


def _segment_case(rng: random.Random) -> tuple[Any, list[str]]:
    model = random_model(rng, inner_meta=rng.random() < 0.3)
    return model, random_words(rng, model, 12)


def _segmented(words: list[str], pieces: Pieces) -> list[tuple[list[int] | None, float, float]]:
    keys = [word.encode() for word in words]
    lengths = np.array([len(key) for key in keys], dtype=np.int64)
    ids = np.zeros(int(lengths.sum()) + 3 * len(keys), dtype=np.int64)
    starts, counts, scores, limits, _ = segment_words(np.frombuffer(b"".join(keys), dtype=np.uint8),
                                                      np.cumsum(lengths) - lengths, lengths, pieces, ids, 0)
    return [(ids[start:start + count].tolist() if count >= 0 else None, float(score), float(limit))
            for start, count, score, limit in zip(starts, counts, scores, limits)]


def _check_segment(model: Any, words: list[str]) -> str | None:
    kernel = _segmented(words, Pieces.of(model))
    expected = reference.segment_words(words, normal_pieces(model), unknown_score(model), byte_ids(model))
    for word, mine, theirs in zip(words, kernel, expected):
        if mine != theirs:
            return f"word {word!r}: kernel (ids, score, sure_before) {mine} != reference {theirs}"
    return None


def test_unigram_best_path():
    holds(_segment_case, _check_segment, FEW_SEEDS)


def _check_segment_against_sentencepiece(model: Any, words: list[str]) -> str | None:
    """Where a word's best path wins by more than rounding (sure_before > 0, nothing before it),
    sentencepiece, alone on the word, takes it too."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.SerializeToString())
    for word, (ids, _, limit) in zip(words, _segmented(words, Pieces.of(model))):
        if word and ids is not None and limit > 0 and processor.encode(word) != ids:
            return f"word {word!r}: kernel {ids} != sentencepiece {processor.encode(word)}"
    return None


def test_unigram_best_path_is_sentencepieces():
    holds(_segment_case, _check_segment_against_sentencepiece, FEW_SEEDS)


def _sure_case(rng: random.Random) -> tuple[None, list[tuple[float, float, int]]]:
    margins = [0.0, math.inf, 1e-9, 5e-4, 0.3, 7.0]
    return None, [(rng.choice(margins) if rng.random() < 0.5 else rng.uniform(0, 20), rng.uniform(-300, 0),
                   rng.randint(3, MAX_WORD + 3)) for _ in range(20)]


def test_sure_before():
    holds(_sure_case, lambda _, cases: differ("sure_before", [float(sure_before(*case)) for case in cases],
                                              [reference.sure_before(*case) for case in cases]))


# --- tokenmill.evaluation.word_cache: its kernels one by one ----------------------------------


def random_line(rng: random.Random, words: list[str]) -> str:
    """Words of `words` joined by spaces, now and then two, or one at either end; or an empty line."""
    if rng.random() < 0.1:
        return rng.choice(["", " ", "  "])
    line = "".join(rng.choice(words) + rng.choice([" "] * 8 + ["  ", ""]) for _ in range(rng.randint(1, 6)))
    return (" " if rng.random() < 0.15 else "") + line.rstrip(" ") + (" " if rng.random() < 0.15 else "")


def _split_case(rng: random.Random) -> tuple[None, list[str]]:
    words = [random_text(rng, 5, spaces=["\t", "\xa0", "\u3000"]) for _ in range(6)]
    return None, [random_line(rng, words) for _ in range(rng.randint(0, 8))]


def _check_split(_: None, lines: list[str]) -> str | None:
    starts, ends, line_words, meta = word_cache._split(*utf8_lines(lines))
    return differ("words, per line, literal ▁", (list(zip(starts.tolist(), ends.tolist())), line_words.tolist(),
                                                 meta.tolist()), reference.split_words(lines))


def test_split_words():
    holds(_split_case, _check_split)


def _keys_case(rng: random.Random) -> tuple[int, list[bytes]]:
    words = [random_text(rng, rng.choice([3, 7, 8, 20])).encode() for _ in range(rng.randint(1, 12))]
    return rng.randint(1, 24), [word for word in words if rng.random() < 0.8] + [b"", b"a" * 7, b"a" * 8]


def _check_codes(bits: int, words: list[bytes]) -> str | None:
    mask = (1 << bits) - 1
    data = np.frombuffer(b"prefix" + b"".join(words), dtype=np.uint8)
    lengths = np.array([len(word) for word in words], dtype=np.int64)
    starts = 6 + np.cumsum(lengths) - lengths
    codes = [int(word_cache._key_code(data, start, length)) for start, length in zip(starts, lengths)]
    return first(differ("codes", codes, [reference.key_code(word) for word in words]),
                 differ("slots", [int(word_cache._slot(np.int64(code), mask)) for code in codes],
                        [reference.slot(reference.key_code(word), mask) for word in words]),
                 differ("leading bytes", [int(value) for value in word_cache._leading_bytes(data, starts, lengths)],
                        [reference.leading_bytes(word) for word in words]))


def test_key_codes_slots_and_leading_bytes():
    holds(_keys_case, _check_codes)


def _look_up_case(rng: random.Random) -> tuple[None, list[list[bytes]]]:
    # Few distinct words, repeated: short ones (packed codes) and long ones sharing a start (hashed).
    stem = random_text(rng, 6).encode()
    pool = [random_text(rng, 4).encode() for _ in range(8)] + [stem + b"-long-%d" % i for i in range(6)] + [b""]
    return None, [[rng.choice(pool) for _ in range(rng.randint(0, 12))] for _ in range(rng.randint(1, 4))]


def _check_look_up(_: None, batches: list[list[bytes]]) -> str | None:
    rows, keys = word_cache._empty_rows(64), np.zeros(4096, dtype=np.uint8)
    words = key_bytes = 0
    row_of_word: dict[int, int] = {}  # the reference's word number -> the kernel's row
    for done, (batch, (numbers, new)) in enumerate(zip(batches, reference.look_up(batches)), start=1):
        data = np.frombuffer(b"".join(batch), dtype=np.uint8)
        lengths = np.array([len(word) for word in batch], dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        row_of, pending, words, key_bytes = word_cache._look_up(data, starts, starts + lengths, rows, keys, words,
                                                                key_bytes)
        for number, row in zip(numbers, row_of.tolist()):
            row_of_word.setdefault(number, row)
        expected_keys = reference.look_up_keys(batches[:done])
        problem = first(differ("rows", row_of.tolist(), [row_of_word[number] for number in numbers]),
                        differ("distinct rows", len(set(row_of_word.values())), len(row_of_word)),
                        differ("pending", pending.tolist(), [row_of_word[number] for number in new]),
                        differ("words, key bytes", (words, key_bytes), (len(row_of_word), len(expected_keys))),
                        differ("keys", keys[:key_bytes].tobytes(), expected_keys))
        if problem:
            return f"batch {done}: {problem}"
    # Rehashed into a larger table, every word is found again with its row (and floats).
    floats = word_cache._empty_floats(len(rows))
    floats[:, 0] = np.arange(len(rows))
    grown, grown_floats = word_cache._empty_rows(128), word_cache._empty_floats(128)
    word_cache._rehash(rows, floats, grown, grown_floats)
    distinct = list(dict.fromkeys(word for batch in batches for word in batch))
    data = np.frombuffer(b"".join(distinct), dtype=np.uint8)
    lengths = np.array([len(word) for word in distinct], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    row_of, pending, after, _ = word_cache._look_up(data, starts, starts + lengths, grown, keys, words, key_bytes)
    return first(differ("pending after rehash", pending.tolist(), []), differ("words after rehash", after, words),
                 differ("rows after rehash", [grown[row].tolist() for row in row_of],
                        [rows[row_of_word[number]].tolist() for number in range(len(distinct))]),
                 differ("floats after rehash", [int(grown_floats[row, 0]) for row in row_of],
                        [row_of_word[number] for number in range(len(distinct))]))


def test_look_up_and_rehash():
    holds(_look_up_case, _check_look_up)


def _group_case(rng: random.Random) -> tuple[int, bytes]:
    words = [random_text(rng, 6, spaces=None).encode() for _ in range(rng.randint(0, 10))]
    return rng.randint(1, 30), b"".join(word + b" " for word in words)


def _check_group_ends(size: int, keys: bytes) -> str | None:
    ends = word_cache._group_ends(np.frombuffer(keys, dtype=np.uint8), size)
    return differ("ends", ends.tolist(), reference.group_ends(keys, size))


def test_group_ends():
    holds(_group_case, _check_group_ends)


def _align_case(rng: random.Random) -> tuple[list[int], tuple[list[int], list[int]]]:
    piece_bytes = [1, 2, 3, 4, 5, 6] + [rng.choice([-1, 1, 2, 3, 4, 7]) for _ in range(rng.randint(0, 6))]
    by_size: dict[int, list[int]] = {}
    for i, size in enumerate(piece_bytes):
        by_size.setdefault(size, []).append(i)
    lengths = [rng.randint(0, 8) for _ in range(rng.randint(0, 5))]
    flat = []
    for length in lengths:
        left = 3 + length
        while left:
            size = rng.randint(1, min(left, 6))
            flat.append(rng.choice(by_size[size]))
            left -= size
    if rng.random() < 0.35:
        flat = _perturbed(rng, flat, len(piece_bytes))
    return piece_bytes, (lengths, flat)


def _check_align(piece_bytes: list[int], case: tuple[list[int], list[int]]) -> str | None:
    lengths, flat = case
    rows = np.zeros((len(lengths), 5), dtype=np.int64)
    rows[:, word_cache._KEY_LENGTH] = lengths
    aligned = word_cache._align(np.array(flat, dtype=np.int64), np.array(piece_bytes, dtype=np.int64), rows,
                                np.arange(len(lengths), dtype=np.int64), 5)
    runs = reference.align(flat, piece_bytes, lengths)
    if not aligned or runs is None:
        return differ("aligned", bool(aligned), runs is not None)
    return differ("runs", [(int(start) - 5, int(count)) for start, count in rows[:, 3:5].tolist()], runs)


def test_align():
    holds(_align_case, _check_align)


# --- tokenmill.evaluation.word_cache: the whole cache (`_assemble`) -------------------------


def cache_pieces(model: model_pb2.ModelProto) -> tuple[list[bytes | None], frozenset[int]]:
    """The bytes each id stands for, as `tokenmill.evaluation.encoders.SentencePieceEncoder` gives
    them to the cache ("▁" a space; None for control and unknown pieces), and the byte pieces."""
    bytes_of: list[bytes | None] = []
    for piece in model.pieces:
        if piece.type == Piece.BYTE:
            bytes_of.append(bytes([int(piece.piece[3:5], 16)]))
        else:
            bytes_of.append(None if piece.type in (Piece.CONTROL, Piece.UNKNOWN) else
                            piece.piece.replace("\u2581", " ").encode())
    return bytes_of, frozenset(i for i, piece in enumerate(model.pieces) if piece.type == Piece.BYTE)


def _cache_case(rng: random.Random, model_type: int) -> tuple[Any, list[list[str]]]:
    model = random_model(rng, model_type)
    words = [*random_words(rng, model, 10), "", "a\u2581b"]
    return model, [[random_line(rng, words) for _ in range(rng.randint(0, 8))] for _ in range(rng.randint(1, 3))]


def greedy_encoder(model: model_pb2.ModelProto) -> tuple[Callable[[list[str]], list[list[int]]],
                                                         Callable[[str], list[int]]]:
    """A stand-in for sentencepiece BPE that encodes words apart (and a word alone): each word
    ("▁" + it) by the longest piece first, bytes where none fits."""
    normal = normal_pieces(model)
    byte_of = byte_ids(model)
    longest = max(map(len, normal))

    @functools.cache
    def word_ids(word: str) -> list[int]:
        text, ids, start = "\u2581" + word, [], 0
        while start < len(text):
            end = next((end for end in range(min(len(text), start + longest), start, -1) if text[start:end] in normal),
                       None)
            if end is None:
                ids += [byte_of[byte] for byte in text[start].encode("utf-8")]
                start += 1
            else:
                ids.append(normal[text[start:end]][0])
                start = end
        return ids

    def encode(lines: list[str]) -> list[list[int]]:
        return [[i for word in (line.split(" ") if line else []) for i in word_ids(word)] for line in lines]

    return encode, word_ids


def _check_cache(model: Any, batches: list[list[str]], encode: Callable[[list[str]], list[list[int]]],
                 segment: reference.Segment) -> str | None:
    pieces, byte_pieces = cache_pieces(model)
    cache = word_cache.word_cache(model, encode, pieces, byte_pieces)
    for done, lines in enumerate(batches, start=1):
        words = cache.encode(lines)
        if words is None:
            return f"batch {done}: the cache refused a model that encodes words apart"
        flat, counts, spans, unsure = reference.cache_lines(lines, segment, pieces, byte_pieces)
        sure = np.repeat(~words.unsure, words.counts)
        problem = first(differ("ids", words.flat.tolist(), flat), differ("counts", words.counts.tolist(), counts),
                        differ("unsure", words.unsure.tolist(), unsure),
                        differ("spans of sure lines", pairs(words.spans[sure]),
                               [span for span, keep in zip(spans, sure.tolist()) if keep]))
        if problem:
            return f"batch {done}: {problem}"
    return None


def _check_unigram_cache(model: Any, batches: list[list[str]]) -> str | None:
    normal, unknown, bytes_ = normal_pieces(model), unknown_score(model), byte_ids(model)
    return _check_cache(model, batches, lambda lines: [], lambda word: reference.segment_words(
        [word], normal, unknown, bytes_)[0])


def test_unigram_word_cache():
    holds(lambda rng: _cache_case(rng, model_pb2.TrainerSpec.UNIGRAM), _check_unigram_cache, FEW_SEEDS)


def _check_unigram_cache_against_sentencepiece(model: Any, batches: list[list[str]]) -> str | None:
    """The cache's sure lines have sentencepiece's ids for the whole line."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model.SerializeToString())
    pieces, byte_pieces = cache_pieces(model)
    cache = word_cache.word_cache(model, lambda lines: [], pieces, byte_pieces)
    for lines in batches:
        words = cache.encode(lines)
        ids = np.split(words.flat, np.cumsum(words.counts)[:-1]) if lines else []
        for line, line_ids, unsure in zip(lines, ids, words.unsure.tolist()):
            if not unsure and line_ids.tolist() != processor.encode(line):
                return f"line {line!r}: cache {line_ids.tolist()} != sentencepiece {processor.encode(line)}"
    return None


def test_unigram_word_cache_is_sentencepieces():
    holds(lambda rng: _cache_case(rng, model_pb2.TrainerSpec.UNIGRAM), _check_unigram_cache_against_sentencepiece,
          FEW_SEEDS)


def _check_bpe_cache(model: Any, batches: list[list[str]]) -> str | None:
    encode, word_ids = greedy_encoder(model)
    problem = _check_cache(model, batches, encode, lambda word: (word_ids(word), 0.0, math.inf))
    if problem is None:  # the reference's ids are the encoder's, line by line
        lines = [line for batch in batches for line in batch]
        ids = [i for word_ids_ in encode(lines) for i in word_ids_]
        problem = differ("reference vs encoder", reference.cache_lines(lines, lambda word: (
            word_ids(word), 0.0, math.inf), *cache_pieces(model))[0], ids)
    return problem


def test_bpe_word_cache():
    """BPE words are encoded by the model's own encoder (here a stand-in), so a line's ids are that
    encoder's for the line."""
    holds(lambda rng: _cache_case(rng, model_pb2.TrainerSpec.BPE), _check_bpe_cache, FEW_SEEDS)
