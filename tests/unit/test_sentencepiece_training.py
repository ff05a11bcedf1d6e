"""sentencepiece training on real multilingual text, and its tokenizer.json checked against it:
sentencepiece, `tokenizers` and transformers must give the same ids and the same decoding."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from tokenmill.errors import InvalidInput
from tokenmill.sentencepiece_training import (
    BYTE_PIECE_TYPE,
    SentencePieceResult,
    sample,
    train_sentencepiece,
    trainer_options,
    vocab_file,
)
from tokenmill.spec import resolve_spec

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"
FLORES = CORPORA / "parallel_flores200_dev"
TRAIN_LANGUAGES = ("eng_Latn", "zho_Hans", "arb_Arab", "hin_Deva")
# Unseen scripts: most of their characters are outside the vocabulary.
UNSEEN_LANGUAGES = ("jpn_Jpan", "kor_Hang", "rus_Cyrl", "tha_Thai", "amh_Ethi")
SPECIALS = ["<s>", "<|user|>", "</s>", "<pad>", "<mask>"]
PROBES = [
    "Hello world", "  two  spaces ", " leading", "trailing ", "tab\there", "new\nline", "a\r\nb", "", " ", "   ",
    "😀 emoji 👩‍👩‍👧 ①②", "ﬁ ligature Å", "e\u0301 combining", "\u3000ideographic space", "nbsp\u00a0x",
    "ctrl\x01x nul\x00", "zero\u200bwidth", "digits 1234567890 12,345.67 007", "中文测试：你好，世界！",
    "مرحبا بالعالم", "हिन्दी परीक्षण", "Ελληνικά кириллица", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "x" * 50, "ab" * 40,
    "The  quick\tbrown\n\nfox   jumps.", "한국어 텍스트", "ไทย ข้อความ", "a<|user|>b", "end <|user|>", "  <|user|>  ",
    "literal <0x41> and <0xZZ>", "code: if (a<0x10) { b = <0x41>; }",
]


def lines(language: str, count: int, skip: int = 0) -> list[str]:
    with (FLORES / f"{language}.txt").open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in itertools.islice(handle, skip, skip + count)]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return [line for language in TRAIN_LANGUAGES for line in lines(language, 500)]


@pytest.fixture(scope="module")
def heldout() -> list[str]:
    seen = [line for language in TRAIN_LANGUAGES for line in lines(language, 40, skip=900)]
    return seen + [line for language in UNSEEN_LANGUAGES for line in lines(language, 40)]


def spec_for(**fields):
    raw = {"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 3000, "character_coverage": 0.995}
    return resolve_spec(raw | fields)


class Trained:
    """A training result loaded the three ways a user can load it."""

    def __init__(self, result: SentencePieceResult, progress: list[float]) -> None:
        self.result = result
        self.progress = progress
        self.sp = sentencepiece.SentencePieceProcessor(model_proto=result.model)
        self.tok = Tokenizer.from_str(result.tokenizer_json)
        self.fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(result.tokenizer_json))


def train(spec, texts) -> Trained:
    progress: list[float] = []
    return Trained(train_sentencepiece(spec, texts, progress.append), progress)


@pytest.fixture(scope="module", params=[("unigram", False), ("unigram", True), ("bpe", False), ("bpe", True)],
                ids=lambda p: f"{p[0]}-{'bytes' if p[1] else 'nobytes'}")
def trained(request, texts) -> Trained:
    algorithm, byte_fallback = request.param
    return train(spec_for(algorithm=algorithm, byte_fallback=byte_fallback, special_tokens=SPECIALS), texts)


def test_ids_are_the_same_in_sentencepiece_tokenizers_and_transformers(trained, heldout):
    for text in PROBES + heldout:
        expected = trained.sp.encode(text)
        assert trained.tok.encode(text).ids == expected, text
        assert trained.fast.encode(text) == expected, text


def test_decoding_is_the_same_for_ids_without_unk(trained, heldout):
    unk = trained.sp.unk_id()
    checked = 0
    for text in PROBES + heldout:
        ids = trained.sp.encode(text)
        if unk in ids:
            continue
        checked += 1
        assert trained.tok.decode(ids, skip_special_tokens=False) == trained.sp.decode(ids) == trained.fast.decode(ids)
    assert checked >= len(PROBES) // 2


def test_with_byte_fallback_every_text_round_trips_except_the_metaspace_character(texts, heldout):
    model = train(spec_for(algorithm="bpe", byte_fallback=True), texts)
    for text in PROBES + heldout:
        ids = model.sp.encode(text)
        assert model.sp.unk_id() not in ids
        assert model.sp.decode(ids) == text == model.tok.decode(ids) == model.fast.decode(ids)
    assert model.sp.decode(model.sp.encode("a▁b")) == "a b"  # "▁" is sentencepiece's space


def test_characters_outside_the_coverage_fall_back_to_bytes(trained):
    text = "불고기 🦜"  # no Korean and no parrot in the training text
    pieces = trained.sp.encode(text, out_type=str)
    if trained.result.model and trained.sp.is_byte(trained.sp.piece_to_id("<0xF0>")):
        assert "<0xF0>" in pieces and "<0x9F>" in pieces
        assert trained.tok.encode(text).tokens == pieces
        assert trained.sp.decode(trained.sp.encode(text)) == text == trained.tok.decode(trained.tok.encode(text).ids)
    else:
        assert trained.sp.unk_id() in trained.sp.encode(text)
        assert trained.sp.decode(trained.sp.encode(text)) != text


def test_byte_pieces_are_256_and_follow_the_special_tokens(trained):
    pieces = json.loads(trained.result.tokenizer_json)["model"]["vocab"]
    names = [piece[0] if isinstance(piece, list) else piece for piece in pieces]
    has_bytes = trained.sp.is_byte(7)
    assert has_bytes == ("<0x00>" in names)
    if has_bytes:
        assert [trained.sp.id_to_piece(i) for i in range(6, 6 + 256)] == [f"<0x{b:02X}>" for b in range(256)]
        assert all(trained.sp.is_byte(i) for i in range(6, 6 + 256))


def test_special_tokens_take_the_first_ids_in_list_order_with_unk_first(trained):
    sp = trained.sp
    assert [sp.id_to_piece(i) for i in range(6)] == ["<unk>", *SPECIALS]
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 3, 4)
    added = {token["content"]: token for token in json.loads(trained.result.tokenizer_json)["added_tokens"]}
    assert {content: token["id"] for content, token in added.items()} == {"<unk>": 0, **{t: i + 1 for i, t in enumerate(SPECIALS)}}
    assert all(token["special"] for token in added.values())
    # A user-defined symbol is never split and is its own id in all three.
    for text in ("a<|user|>b", "x <mask> y"):
        ids = sp.encode(text)
        assert (2 in ids) or (5 in ids)
        assert trained.tok.encode(text).ids == ids == trained.fast.encode(text)


def test_default_special_tokens_are_unk_bos_eos_and_no_pad():
    options = trainer_options(resolve_spec({"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 4000}))
    assert (options["unk_id"], options["bos_id"], options["eos_id"], options["pad_id"]) == (0, 1, 2, -1)
    assert options["user_defined_symbols"] == []
    options = trainer_options(spec_for(special_tokens=["</s>", "<|endoftext|>"]))
    assert (options["unk_id"], options["bos_id"], options["eos_id"], options["pad_id"]) == (0, -1, 1, -1)
    assert options["user_defined_symbols"] == ["<|endoftext|>"]


def test_what_differs_by_design(trained):
    # A text that starts with a special token: sentencepiece puts a lone "▁" in front.
    metaspace = trained.sp.piece_to_id("▁")
    for text in ("<|user|>start", "<mask> hi <|user|>"):
        assert trained.sp.encode(text) == [metaspace, *trained.tok.encode(text).ids]
    # The text of a control token is the token for `tokenizers`, characters for sentencepiece.
    assert trained.tok.encode("x<s>y").ids.count(trained.sp.bos_id()) == 1
    assert trained.sp.bos_id() not in trained.sp.encode("x<s>y")


def test_nfkc_with_lowercase_is_case_folded_nfkc_in_all_three(texts, heldout):
    extra = ["Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ １２３", "ﬁ ﬂ ① ㈱", "MiXeD CaSe ÄÖÜ ß", "a\u00a0b\u3000c"]
    model = train(spec_for(normalization="nfkc", lowercase=True, byte_fallback=True, split_digits=True), texts + extra * 10)
    assert model.sp.decode(model.sp.encode("Ｆｕｌｌ ＡＢＣ ﬁ")) == "full abc fi"
    for text in PROBES + heldout + extra:
        ids = model.sp.encode(text)
        if text.startswith("<"):
            continue
        assert model.tok.encode(text).ids == ids == model.fast.encode(text), text
        assert model.tok.decode(ids) == model.sp.decode(ids)
    assert all(len(piece) == 1 for piece in model.sp.encode("1234567890", out_type=str)[1:])  # split_digits


def test_combinations_sentencepiece_cannot_honour_are_refused():
    with pytest.raises(InvalidInput) as error:
        trainer_options(spec_for(lowercase=True))
    assert error.value.field == "spec.lowercase"
    with pytest.raises(InvalidInput) as error:
        trainer_options(spec_for(max_token_length=513))
    assert error.value.field == "spec.max_token_length"
    assert trainer_options(spec_for(max_token_length=8))["max_sentencepiece_length"] == 8
    assert trainer_options(spec_for())["max_sentencepiece_length"] == 16


def test_vocab_file_is_what_spm_train_writes(texts, tmp_path):
    spec = spec_for(algorithm="bpe", byte_fallback=True, special_tokens=SPECIALS, vocab_size=1500)
    options = trainer_options(spec)
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(texts + ["tab\there"] * 20),
                                             model_prefix=str(tmp_path / "m"), **options)
    proto = sentencepiece.sentencepiece_model_pb2.ModelProto.FromString((tmp_path / "m.model").read_bytes())
    assert vocab_file(proto) == (tmp_path / "m.vocab").read_bytes()
    result = train_sentencepiece(spec, texts)
    rows = result.vocab.decode().splitlines()
    assert len(rows) == result.vocab_size == 1500
    assert rows[:2] == ["<unk>\t0", "<s>\t0"]


def test_training_twice_gives_the_same_bytes(trained, texts):
    algorithm = "unigram" if trained.sp.piece_to_id("<0x00>") == 0 or True else "bpe"
    again = train_sentencepiece(spec_for(algorithm=_algorithm(trained), byte_fallback=_byte_fallback(trained),
                                         special_tokens=SPECIALS), texts)
    assert again.model == trained.result.model
    assert again.vocab == trained.result.vocab
    assert again.tokenizer_json == trained.result.tokenizer_json
    del algorithm


def _algorithm(trained: Trained) -> str:
    proto = sentencepiece.sentencepiece_model_pb2.ModelProto.FromString(trained.result.model)
    return "unigram" if proto.trainer_spec.model_type == proto.trainer_spec.UNIGRAM else "bpe"


def _byte_fallback(trained: Trained) -> bool:
    return sentencepiece.sentencepiece_model_pb2.ModelProto.FromString(trained.result.model).trainer_spec.byte_fallback
