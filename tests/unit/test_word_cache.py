"""sentencepiece a word at a time (BPE and Unigram): the same ids as sentencepiece line by line,
on real and adversarial text, long lines included, through growth, restarts and a model that
breaks the rule."""

import random

import numpy as np
import pytest
from sentencepiece import sentencepiece_model_pb2 as model_pb2

from tests.combinations import TORTURE
from tests.text import flores_lines
from tokenmill.evaluation import word_cache
from tokenmill.evaluation.encoders import SentencePieceEncoder
from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_sentencepiece import train_sentencepiece

ODD_LINES = [*TORTURE, "", " ", "  ", "a", " a", "a ", "a  b", "   three   spaces   ", "▁literal▁meta▁ symbol ▁ ▁▁", "<s> </s> <unk> <0x41> text that looks like control pieces", "x" * 3000, "東京" * 500, "\t", "a\xa0b c\u3000d"]
LANGUAGES = ("eng_Latn", "spa_Latn", "deu_Latn", "rus_Cyrl", "arb_Arab", "hin_Deva", "zho_Hans", "jpn_Jpan", "tha_Thai")


def model(algorithm: str) -> bytes:
    spec = resolve_spec({"library": "sentencepiece", "algorithm": algorithm, "vocab_size": 3000, "byte_fallback": True})
    return train_sentencepiece(spec, flores_lines(400, languages=LANGUAGES)).model


@pytest.fixture(scope="module")
def bpe() -> bytes:
    return model("bpe")


@pytest.fixture(scope="module", params=["bpe", "unigram"])
def either(request, bpe) -> bytes:
    return bpe if request.param == "bpe" else model("unigram")


def encoders(model_bytes: bytes) -> tuple[SentencePieceEncoder, SentencePieceEncoder]:
    return (SentencePieceEncoder("direct", model_bytes, threads=1),
            SentencePieceEncoder("words", model_bytes, threads=1, cache_words=True))


@pytest.mark.large
def test_a_word_at_a_time_gives_sentencepiece_ids(either):
    direct, cached = encoders(either)
    assert word_cache.applies(model_pb2.ModelProto.FromString(either)) and cached.encoded_by == "sentencepiece+word cache"
    held_out = flores_lines(300, offset=500, languages=LANGUAGES)
    # Long lines: a Unigram line's score before a word grows with them, and float32 rounding
    # with it, until the rule sends the line to sentencepiece.
    long_lines = [" ".join(held_out[i:i + 40]) for i in range(0, len(held_out), 40)]
    for batch in [held_out[i:i + 256] for i in range(0, len(held_out), 256)] + [ODD_LINES, ODD_LINES, long_lines]:
        assert cached.encode(batch) == direct.encode(batch)
        flat, counts = cached._ids(batch)
        assert flat.tolist() == [token for ids in direct.encode(batch) for token in ids]
        assert counts.tolist() == [len(ids) for ids in direct.encode(batch)]
        # Spans read off the cached pieces equal the spelling's (or the exact path's).
        ours, theirs = cached.encode_batch(batch), direct.encode_batch(batch)
        assert (ours.flat == theirs.flat).all() and (ours.counts == theirs.counts).all()
        assert (ours.spans == theirs.spans).all() and ours.roundtrips == theirs.roundtrips
    # Seen words are looked up, not encoded again.
    words = len(cached.words)
    assert cached.encode(held_out[:100]) == direct.encode(held_out[:100]) and len(cached.words) == words
    cached.begin()  # a new measurement starts with the empty word only
    assert len(cached.words) == 1
    assert cached.encode(ODD_LINES) == direct.encode(ODD_LINES)


@pytest.mark.slow
def test_unigram_lines_that_rounding_could_change_go_to_sentencepiece():
    direct, cached = encoders(model("unigram"))
    held_out = flores_lines(300, offset=500, languages=LANGUAGES)
    unsure = cached.words.encode(held_out).unsure
    assert not unsure.all()
    long_lines = [" ".join(held_out[i:i + 60]) for i in range(0, len(held_out), 60)]
    unsure_long = cached.words.encode(long_lines).unsure
    # Past a few thousand of score, some word's margin is within reach of float32 rounding.
    assert unsure_long.mean() > unsure.mean()
    assert cached.encode(long_lines) == direct.encode(long_lines)


@pytest.mark.large
def test_the_cache_grows_and_starts_over_when_full(either, monkeypatch):
    direct, cached = encoders(either)
    rng = random.Random(3)
    alphabet = "abcdefghijklmnopqrstuvwxyzäöüñ東京ж"
    words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(50000)]
    lines = [" ".join(words[i:i + 10]) + " " * rng.randint(0, 2) for i in range(0, len(words), 10)]
    assert cached.encode(lines) == direct.encode(lines)
    assert len(cached.words) > 1 << 15  # past the first table size: rows were rehashed
    assert cached.encode(lines[::-1]) == direct.encode(lines[::-1])
    monkeypatch.setattr(word_cache, "MAX_WORDS", 5000)
    for start in range(0, 5000, 1000):
        batch = lines[start:start + 500]
        assert cached.encode(batch) == direct.encode(batch)
        assert len(cached.words) <= 5000


def test_pieces_that_run_over_a_word_end_refuse_the_batch(bpe):
    direct, _ = encoders(bpe)
    piece_bytes = np.array([len(direct.processor.id_to_piece(i).encode()) for i in range(direct.vocab_size)])
    a_b, space = direct.processor.piece_to_id("▁a"), direct.processor.piece_to_id("▁")
    # An encoder that gives "▁a" for "▁a▁b": short of the second word, as a model breaking the rule would.
    cache = word_cache.BpeWords(lambda lines: [[space, space] if line == " " else [a_b] for line in lines], piece_bytes,
                                np.ones(len(piece_bytes), dtype=np.int64), np.full(len(piece_bytes), -1))
    assert cache.encode(["a b"]) is None and len(cache) == 1
    assert cache.encode([" "]) is not None  # the empty word is known from the start


def test_no_lines_and_a_failing_encode_leave_nothing_behind(bpe):
    direct, cached = encoders(bpe)  # (a Unigram word is segmented here: nothing fails)
    assert cached.encode([]) == direct.encode([]) == []
    with pytest.raises((TypeError, RuntimeError)):  # sentencepiece refuses a lone surrogate
        cached.encode(["hello \ud800"])
    assert cached.encode(["hello"]) == direct.encode(["hello"])  # "hello" was not kept without its ids


@pytest.mark.slow
def test_only_models_that_normalize_nothing_apply(bpe):
    proto = model_pb2.ModelProto.FromString(bpe)
    proto.pieces.add(piece="a\u2581b", score=0.0, type=model_pb2.ModelProto.SentencePiece.USER_DEFINED)
    assert not word_cache.applies(proto)
    proto = model_pb2.ModelProto.FromString(bpe)
    proto.normalizer_spec.name = "nmt_nfkc"
    assert not word_cache.applies(proto)
    unigram = model_pb2.ModelProto.FromString(model("unigram"))
    assert word_cache.applies(unigram)
    # sentencepiece's bonus for user-defined pieces has changed between releases: not modelled.
    unigram.pieces.add(piece="<x>", score=0.0, type=model_pb2.ModelProto.SentencePiece.USER_DEFINED)
    assert not word_cache.applies(unigram)
