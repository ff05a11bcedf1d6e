"""sentencepiece Unigram's best path of a word, computed here: the same pieces as sentencepiece
wherever the best path wins by a margin, the trie holding every piece, and the rounding rule."""

import numpy as np
import pytest
import sentencepiece
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from tests.text import flores_lines
from tests.unit.test_word_cache import LANGUAGES, model
from tokenmill.evaluation.unigram import MAX_WORD, Pieces, _breadth_first, segment_words, sure_before


@pytest.fixture(scope="module")
def unigram() -> bytes:
    return model("unigram")


def pieces_of(model_bytes: bytes) -> Pieces:
    return Pieces.of(model_pb2.ModelProto.FromString(model_bytes))


def segmented(words: list[str], pieces: Pieces):
    keys = [word.encode() for word in words]
    lengths = np.array([len(key) for key in keys], dtype=np.int64)
    ids = np.zeros(int(lengths.sum()) + 3 * len(keys), dtype=np.int64)
    starts, counts, scores, limits, _ = segment_words(np.frombuffer(b"".join(keys), dtype=np.uint8),
                                                      np.cumsum(lengths) - lengths, lengths, pieces, ids, 0)
    return [ids[start:start + count].tolist() if count >= 0 else None for start, count in zip(starts, counts)], scores, limits


def test_words_get_sentencepiece_pieces_and_scores(unigram):
    processor = sentencepiece.SentencePieceProcessor(model_proto=unigram)
    words = sorted({word for line in flores_lines(200, offset=600, languages=LANGUAGES) for word in line.split(" ")})
    words += ["", "👋🏽", "\u2581", "x" * 40, "東京" * 20, "\x01\x7f", "a\u00a0b"]
    ours, scores, limits = segmented(words, pieces_of(unigram))
    theirs = [processor.encode(" " + word)[1:] if not word else processor.encode(word) for word in words]
    # Where the best path wins by more than rounding at the start of a line, sentencepiece
    # (alone on the word) takes it too.
    differ = [word for word, mine, its, limit in zip(words, ours, theirs, limits) if mine != its and limit > 0]
    assert differ == []
    short = [limit for word, limit in zip(words, limits) if len(word.encode()) <= MAX_WORD]
    assert sum(limit <= 0 for limit in short) < len(short) / 100  # ties are rare
    # The score is the sum of the pieces' float32 scores ("" is the lone "▁"), an unknown
    # character (its bytes, here) scoring 10 below the lowest piece.
    proto = model_pb2.ModelProto.FromString(unigram)
    byte = model_pb2.ModelProto.SentencePiece.BYTE
    unknown = min(piece.score for piece in proto.pieces if piece.type == model_pb2.ModelProto.SentencePiece.NORMAL) - 10
    checked = 0
    for word, ids, score in zip(words, ours, scores):
        if ids is None:
            continue
        pieces = [i for i in ids if proto.pieces[i].type != byte]
        characters = len(word) + 1 - sum(len(proto.pieces[i].piece) for i in pieces)  # those not in a piece
        expected = sum(float(np.float32(proto.pieces[i].score)) for i in pieces) + characters * unknown
        assert score == pytest.approx(expected, abs=1e-3), word
        checked += 1
    assert checked > 1000


def test_the_trie_holds_every_normal_piece(unigram):
    pieces = pieces_of(unigram)
    proto = model_pb2.ModelProto.FromString(unigram)
    units = pieces.units
    for i, piece in enumerate(proto.pieces):
        unit = 0
        for byte in piece.piece.encode():
            base = units[unit, 0]
            child = base + byte
            unit = child if base > 0 and child < len(units) and units[child, 1] == unit else -1
            if unit < 0:
                break
        found = unit if unit < 0 else units[unit, 2]
        assert found == (i if piece.type == model_pb2.ModelProto.SentencePiece.NORMAL else -1), piece.piece


def test_the_trie_is_numbered_breadth_first_with_children_together():
    keys = [b"a", b"ab", b"abc", b"b", b"bb"]  # sorted; ids 10..14
    first_child, child_count, leading, piece_at = _breadth_first(
        np.frombuffer(b"".join(keys), dtype=np.uint8), np.cumsum([len(key) for key in keys]),
        np.arange(10, 15, dtype=np.int64))
    # root; a, b; ab (under a), bb (under b); abc
    assert leading.tolist() == [0, ord("a"), ord("b"), ord("b"), ord("b"), ord("c")]
    assert piece_at.tolist() == [-1, 10, 13, 11, 14, 12]
    assert child_count.tolist() == [2, 1, 1, 1, 0, 0]
    assert [first_child[node] for node in range(6) if child_count[node]] == [1, 3, 4, 5]


def test_long_words_are_left_to_sentencepiece(unigram):
    ids, _, _ = segmented(["a" * (MAX_WORD + 1), "a" * MAX_WORD], pieces_of(unigram))
    assert ids[0] is None and len(ids[1]) > 0


def test_the_rounding_rule():
    assert sure_before(np.inf, -10.0, 5) == np.inf  # no other path
    assert sure_before(0.0, -10.0, 5) < 0  # a tie: never sure
    # More margin, or a shorter word, is sure after a lower line score.
    assert sure_before(0.01, -10.0, 5) > sure_before(0.001, -10.0, 5) > 0
    assert sure_before(0.01, -10.0, 5) > sure_before(0.01, -10.0, 50)
    # "cruel" in BENCHMARKS.md's 32k model, 0.00056 ahead of its runner-up: sure only early in a line.
    assert 0 < sure_before(0.00056, -26.7, 8) < 500
