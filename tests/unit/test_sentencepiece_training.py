"""sentencepiece training on real multilingual text, and its tokenizer.json checked against it:
sentencepiece, `tokenizers` and transformers must give the same ids and decode the same."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece
from sentencepiece import sentencepiece_model_pb2 as model_pb2
from tokenizers import Tokenizer
from transformers import PreTrainedTokenizerFast

from tests.services import FIXTURES
from tokenmill.errors import InvalidInput
from tokenmill.training.sampling import reservoir_sample as sample
from tokenmill.training.spec import TrainingSpec, resolve_spec
from tokenmill.training.with_sentencepiece import train_sentencepiece, trainer_options, vocab_file

FLORES = FIXTURES / "parallel_flores200_dev"
TRAIN_LANGUAGES = ("eng_Latn", "zho_Hans", "arb_Arab", "hin_Deva")
# Scripts the models never see: most of their characters are outside the vocabulary.
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


def spec_for(**fields) -> TrainingSpec:
    raw = {"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 3000, "character_coverage": 0.995}
    return resolve_spec(raw | fields)


class Trained:
    """A training result, loaded the three ways a user can load it."""

    def __init__(self, spec: TrainingSpec, texts: list[str]) -> None:
        self.spec = spec
        self.progress: list[float] = []
        self.result = train_sentencepiece(spec, texts, self.progress.append)
        self.sp = sentencepiece.SentencePieceProcessor(model_proto=self.result.model)
        self.tok = Tokenizer.from_str(self.result.tokenizer_json)
        self.fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(self.result.tokenizer_json))


@pytest.fixture(scope="module", params=[("unigram", False), ("unigram", True), ("bpe", False), ("bpe", True)],
                ids=lambda p: f"{p[0]}-{'byte_fallback' if p[1] else 'unk'}")
def trained(request, texts) -> Trained:
    algorithm, byte_fallback = request.param
    return Trained(spec_for(algorithm=algorithm, byte_fallback=byte_fallback, special_tokens=SPECIALS), texts)


def test_ids_are_the_same_in_sentencepiece_tokenizers_and_transformers(trained, heldout):
    for text in PROBES + heldout:
        expected = trained.sp.encode(text)
        assert trained.tok.encode(text).ids == expected, text
        assert trained.fast.encode(text) == expected, text


def test_decoding_is_the_same_for_ids_without_unk(trained, heldout):
    checked = 0
    for text in PROBES + heldout:
        ids = trained.sp.encode(text)
        if trained.sp.unk_id() in ids:
            continue
        checked += 1
        # Slices too, the dummy prefix comes off the same way; but not those that cut a character's
        # byte pieces (see test_characters_outside_the_coverage_become_bytes_or_unk).
        for part in (ids, ids[1:], ids[2:-1]):
            if part is ids or "\ufffd" not in trained.sp.decode(part):
                assert trained.tok.decode(part, skip_special_tokens=False) == trained.sp.decode(part) == trained.fast.decode(part)
    assert checked >= len(PROBES) // 2


def test_characters_outside_the_coverage_become_bytes_or_unk(trained):
    text = "불고기 🦜"  # no Korean and no parrot in the training text
    ids = trained.sp.encode(text)
    assert trained.tok.encode(text).ids == ids
    if trained.spec.byte_fallback:
        assert "<0xF0>" in trained.sp.encode(text, out_type=str)
        assert trained.sp.decode(ids) == text == trained.tok.decode(ids) == trained.fast.decode(ids)
        # Ids that cut a character's byte pieces: sentencepiece keeps the whole characters of the
        # run and replaces each byte left over; `tokenizers` replaces every byte of the run.
        cut = trained.sp.encode("①②")[:-1]
        assert trained.sp.decode(cut) == "①\ufffd\ufffd" and trained.tok.decode(cut) == "\ufffd" * 5
    else:
        assert trained.sp.unk_id() in ids
        assert trained.sp.decode(ids) == " ⁇   ⁇ " and trained.tok.decode(ids, skip_special_tokens=False) == "<unk> <unk>"


def test_special_tokens_take_the_first_ids_in_list_order_with_unk_first(trained):
    sp = trained.sp
    assert [sp.id_to_piece(i) for i in range(6)] == ["<unk>", *SPECIALS]
    assert (sp.unk_id(), sp.bos_id(), sp.eos_id(), sp.pad_id()) == (0, 1, 3, 4)
    added = json.loads(trained.result.tokenizer_json)["added_tokens"]
    assert [(token["id"], token["content"], token["special"]) for token in added] == [
        (i, token, True) for i, token in enumerate(["<unk>", *SPECIALS])]
    # A user-defined symbol is never split: it is its own id, in all three.
    for text, token_id in (("a<|user|>b", 2), ("x <mask> y", 5), ("1<mask><|user|>2", 5)):
        ids = sp.encode(text)
        assert ids.count(token_id) == 1, text
        assert trained.tok.encode(text).ids == ids == trained.fast.encode(text)
    if trained.spec.byte_fallback:
        assert [sp.id_to_piece(i) for i in range(6, 6 + 256)] == [f"<0x{b:02X}>" for b in range(256)]
        assert all(sp.is_byte(i) for i in range(6, 6 + 256)) and not sp.is_byte(6 + 256)
    else:
        assert not any(sp.is_byte(i) for i in range(len(sp)))


def test_what_differs_by_design(trained):
    # A text that starts with a special token: sentencepiece puts a lone "▁" in front of it.
    for text in ("<|user|>start", "<mask> hi <|user|>"):
        assert trained.sp.encode(text) == [trained.sp.piece_to_id("▁"), *trained.tok.encode(text).ids]
    # The text of a control token is that token for `tokenizers`, plain characters for sentencepiece.
    assert trained.tok.encode("x<s>y").ids.count(trained.sp.bos_id()) == 1
    assert trained.sp.bos_id() not in trained.sp.encode("x<s>y")


def test_progress_runs_from_zero_to_one_through_the_training(trained):
    assert trained.progress[0] == 0.0 and trained.progress[-1] == 1.0
    assert trained.progress == sorted(trained.progress)
    assert len([p for p in trained.progress if 0.0 < p < 1.0]) >= 3  # read from sentencepiece's log


def test_training_twice_gives_the_same_bytes(trained, texts):
    again = train_sentencepiece(trained.spec, texts)
    assert again.model == trained.result.model
    assert again.vocab == trained.result.vocab
    assert again.tokenizer_json == trained.result.tokenizer_json


def test_with_byte_fallback_every_text_comes_back_except_the_metaspace_character(texts, heldout):
    model = Trained(spec_for(algorithm="bpe", byte_fallback=True), texts)
    for text in PROBES + heldout:
        ids = model.sp.encode(text)
        assert model.sp.unk_id() not in ids
        assert model.sp.decode(ids) == text == model.tok.decode(ids) == model.fast.decode(ids), text
    assert model.sp.decode(model.sp.encode("a▁b")) == "a b" == model.tok.decode(model.tok.encode("a▁b").ids)


def test_nfkc_with_lowercase_is_case_folded_nfkc_in_all_three(texts, heldout):
    extra = ["Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ １２３", "ﬁ ﬂ ① ㈱", "MiXeD CaSe ÄÖÜ ß", "a\u00a0b\u3000c"]
    model = Trained(spec_for(normalization="nfkc", lowercase=True, byte_fallback=True, split_digits=True), texts + extra * 10)
    assert model.sp.decode(model.sp.encode("Ｆｕｌｌ ＡＢＣ ﬁ\ttab")) == "full abc fi\ttab"
    for text in PROBES + heldout + extra:
        ids = model.sp.encode(text)
        assert model.tok.encode(text).ids == ids == model.fast.encode(text), text
        assert model.tok.decode(ids) == model.sp.decode(ids) == model.fast.decode(ids), text
    assert model.sp.encode("1234", out_type=str) == ["▁", "1", "2", "3", "4"]  # split_digits


def test_default_special_tokens_are_unk_bos_eos_without_pad():
    options = trainer_options(resolve_spec({"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 4000}))
    assert (options["unk_id"], options["bos_id"], options["eos_id"], options["pad_id"]) == (0, 1, 2, -1)
    assert options["user_defined_symbols"] == []
    # Without "<unk>" in the list it comes first anyway; the others keep their order.
    options = trainer_options(spec_for(special_tokens=["</s>", "<|endoftext|>"]))
    assert (options["unk_id"], options["bos_id"], options["eos_id"], options["pad_id"]) == (0, -1, 1, -1)
    assert options["user_defined_symbols"] == ["<|endoftext|>"]


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
    corpus = texts + ["tab\there"] * 20
    # The library's own file output, once, as the reference for the in-memory one.
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_prefix=str(tmp_path / "m"),
                                             **trainer_options(spec))
    written = model_pb2.ModelProto.FromString((tmp_path / "m.model").read_bytes())
    assert vocab_file(written) == (tmp_path / "m.vocab").read_bytes()
    result = train_sentencepiece(spec, corpus)
    assert model_pb2.ModelProto.FromString(result.model).pieces == written.pieces  # the file records model_prefix too
    rows = result.vocab.decode().split("\n")[:-1]
    assert len(rows) == result.vocab_size == 1500
    assert rows[:3] == ["<unk>\t0", "<s>\t0", "<|user|>\t0"]


def test_a_corpus_too_small_for_the_vocabulary_gives_a_smaller_one(texts):
    result = train_sentencepiece(spec_for(vocab_size=50000), texts[:300])
    assert 300 < result.vocab_size < 50000
    assert len(Tokenizer.from_str(result.tokenizer_json).get_vocab()) == result.vocab_size


def test_documents_longer_than_sentencepieces_default_limit_are_trained_on(texts):
    long_document = " ".join(["Quetzalcoatlus"] * 800)  # 12 kB, over the 4192-byte default
    result = train_sentencepiece(spec_for(algorithm="bpe", vocab_size=1500), [*texts[:300], long_document])
    assert "▁Quetzalcoatlus" in Tokenizer.from_str(result.tokenizer_json).get_vocab()


def test_sentencepiece_errors_leave_stderr_as_it_was(texts):
    before = os.fstat(2)
    with pytest.raises(RuntimeError, match="character_coverage"):
        train_sentencepiece(spec_for(vocab_size=300, character_coverage=1.0), texts)  # alphabet > vocabulary
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (before.st_dev, before.st_ino)


def test_an_exception_from_progress_comes_out_after_training(texts):
    class Cancelled(Exception):
        pass

    def progress(fraction: float) -> None:
        if 0.0 < fraction < 1.0:
            raise Cancelled

    before = os.fstat(2)
    with pytest.raises(Cancelled):
        train_sentencepiece(spec_for(algorithm="bpe", vocab_size=1500), texts[:500], progress)
    assert os.fstat(2).st_ino == before.st_ino


def test_sample_is_uniform_and_the_same_for_the_same_seed():
    drawn = sample(map(str, range(10_000)), 1000, seed=3)
    assert len(drawn) == 1000 and len(set(drawn)) == 1000
    assert drawn == sample(map(str, range(10_000)), 1000, seed=3) != sample(map(str, range(10_000)), 1000, seed=4)
    assert 3500 < sum(int(x) for x in drawn) / 1000 < 6500
    assert sample(["a", "b"], 5, seed=0) == ["a", "b"]


SAMPLED_SPEC = {"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 1500, "max_sentences": 600, "seed": 7}
TRAIN_IN_A_NEW_PROCESS = f"""
import hashlib, sys
from tokenmill.training.sampling import reservoir_sample
from tokenmill.training.with_sentencepiece import train_sentencepiece
from tokenmill.training.spec import resolve_spec
spec = resolve_spec({SAMPLED_SPEC!r})
texts = reservoir_sample(sys.stdin.read().split("\\n"), spec.max_sentences, spec.seed)
print(hashlib.sha256(train_sentencepiece(spec, texts).model).hexdigest())
"""


@pytest.mark.slow
def test_max_sentences_samples_the_same_in_every_process(texts):
    # sentencepiece's own sampling (more sentences than input_sentence_size) differs from one
    # process to the next whatever the seed; the sample drawn in Python does not.
    corpus = texts[:1500]
    digests = {
        subprocess.run([sys.executable, "-c", TRAIN_IN_A_NEW_PROCESS], input="\n".join(corpus), capture_output=True,
                       text=True, check=True, cwd=Path(__file__).resolve().parents[2]).stdout.strip()
        for _ in range(2)
    }
    spec = resolve_spec(SAMPLED_SPEC)
    digests.add(hashlib.sha256(train_sentencepiece(spec, sample(corpus, 600, 7)).model).hexdigest())
    assert len(digests) == 1


def test_an_exception_from_the_texts_comes_out_as_itself(texts):
    class CorpusGone(Exception):
        pass

    def broken():
        yield from texts[:200]
        raise CorpusGone("the store went away")

    with pytest.raises(CorpusGone):
        train_sentencepiece(spec_for(algorithm="bpe", vocab_size=1000), broken())
