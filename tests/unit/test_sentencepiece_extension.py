"""Extending a sentencepiece model (issue 21.2): pieces appended after the base's, every base
piece at its id; a BPE base encodes its own text as before; the new language costs fewer pieces."""

import pytest
import sentencepiece as spm
from tokenizers import Tokenizer

from tests.text import flores_lines
from tokenmill.formats.sentencepiece_model import parse
from tokenmill.jobs.sentencepiece_extension import extended_model, sentencepiece_extension_files
from tokenmill.training.spec import BaseSpec, resolve_spec
from tokenmill.training.with_sentencepiece import train_sentencepiece

ENGLISH = flores_lines(400, languages=("eng_Latn",))
HINDI = flores_lines(400, languages=("hin_Deva",))
HELD_OUT_ENGLISH = "The boy plays in the garden every afternoon with his friends."
HELD_OUT_HINDI = flores_lines(20, offset=500, languages=("hin_Deva",))


def trained(algorithm: str, texts: list[str], vocab_size: int) -> bytes:
    spec = resolve_spec({"library": "sentencepiece", "algorithm": algorithm, "vocab_size": vocab_size})
    return train_sentencepiece(spec, texts).model


def pieces(model: bytes, text: str) -> list[int]:
    return spm.SentencePieceProcessor(model_proto=model).encode(text)


@pytest.mark.parametrize("algorithm", ["bpe", "unigram"])
def test_every_base_piece_keeps_its_id_and_the_new_language_costs_fewer_pieces(algorithm):
    base = trained(algorithm, ENGLISH, 600)
    model, added = extended_model(base, trained(algorithm, HINDI, 1200), 600)
    before, after = parse(base), parse(model)
    assert added == 600 and len(after.pieces) == len(before.pieces) + 600
    assert [(p.piece, p.type) for p in after.pieces[:len(before.pieces)]] == [(p.piece, p.type) for p in before.pieces]
    unknown = before.trainer_spec.unk_id
    # The English base knows no Devanagari: each run of it is one unknown piece. The extension
    # spells Hindi in pieces of several characters, none unknown.
    assert all(unknown in pieces(base, line) for line in HELD_OUT_HINDI)
    encoded = [pieces(model, line) for line in HELD_OUT_HINDI]
    assert sum(ids.count(unknown) for ids in encoded) < 0.01 * sum(map(len, encoded))  # a rare character, at most
    characters = sum(len(line.replace(" ", "")) for line in HELD_OUT_HINDI)
    assert sum(map(len, encoded)) < 0.7 * characters, (sum(map(len, encoded)), characters)  # not a character each


def test_a_bpe_base_encodes_its_own_language_as_before():
    base = trained("bpe", ENGLISH, 600)
    model, _ = extended_model(base, trained("bpe", HINDI, 800), 300)
    for line in [HELD_OUT_ENGLISH, *flores_lines(30, offset=600, languages=("eng_Latn",))]:
        assert pieces(model, line) == pieces(base, line)


def test_the_extended_files_load_with_the_ids_of_the_model():
    base = trained("bpe", ENGLISH, 600)
    spec = resolve_spec({"vocab_size": 900, "base": {"tokenizer": "en", "version": 1}})
    spec = spec.model_copy(update={"library": "sentencepiece", "algorithm": "bpe", "byte_level": False,
                                   "pre_tokenizer": "metaspace",
                                   "base": BaseSpec(tokenizer="en", version=1, vocab_size=len(parse(base).pieces))})
    lineage: dict = {}
    trained_files = sentencepiece_extension_files(spec, base, HINDI, lambda *args, **kwargs: None, lineage)
    files = trained_files.files
    assert {"tokenizer.model", "tokenizer.json", "manifest.json"} <= set(files)
    assert lineage["base"]["first_new_id"] == len(parse(base).pieces) and lineage["base"]["pieces_added"] == 300
    text = HELD_OUT_ENGLISH + " " + HELD_OUT_HINDI[0]
    ids = Tokenizer.from_str(files["tokenizer.json"].decode()).encode(text, add_special_tokens=False).ids
    assert ids == pieces(files["tokenizer.model"], text)
    assert trained_files.vocab_size == 900
