"""Spans and round trips read off the ids' spelling equal what each engine's exact path gives
(offsets and decoding), line for line, on ordinary and adversarial text."""

import json

import numpy as np
import pytest
from tokenizers import Tokenizer

from tests.combinations import TORTURE
from tests.text import flores_lines as lines
from tokenmill.evaluation.encoders import SentencePieceEncoder, TokenizersEncoder, reference_encoder, version_encoders
from tokenmill.evaluation.spelling import Spelling
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents
from tokenmill.training.with_sentencepiece import train_sentencepiece

# Lines built to leave the fast path: literal "▁", special-token and byte-token text, leading
# spaces, characters no model saw, empty and blank lines.
ADVERSARIAL = [*TORTURE, "", " ", "   ", " leading", "trailing ", "two  spaces", "▁", "a▁b", "▁start", "end▁", "<unk> first", "<s> x </s>", "<|endoftext|> is text", "literal <0x41> and <0xZZ>", "ctrl\x01x nul\x00", "unseen: ሰላም ᠮᠣᠩᠭᠣᠯ ꦧꦱ 𓀀", "\u3000ideographic space", "tab\there", "x" * 300, "Hello, world.", "x.y", "it's", "I do not", "rock ' n ' roll", "##hash", "a\x1cb", "nbsp\xa0x"]


def tokenizers_encoder(spec: dict) -> TokenizersEncoder:
    return TokenizersEncoder("v", with_tokenizers.train(resolve_spec({"vocab_size": 3000, **spec}), lines()))


def sentencepiece_encoder(algorithm: str) -> SentencePieceEncoder:
    spec = resolve_spec({"library": "sentencepiece", "algorithm": algorithm, "vocab_size": 3000, "byte_fallback": True})
    return SentencePieceEncoder("v", train_sentencepiece(spec, lines()).model)


def rank_file_encoder():
    spec = resolve_spec({"vocab_size": 3000})
    files = version_contents(spec, with_tokenizers.train(spec, lines()), {}, {})
    return version_encoders("v", files, json.loads(files["manifest.json"]))[1]


def _with(tokenizer: Tokenizer, **parts) -> Tokenizer:
    return Tokenizer.from_str(json.dumps(json.loads(tokenizer.to_str()) | parts))


ENCODERS = {
    "char BPE + byte fallback": lambda: tokenizers_encoder({"byte_level": False, "pre_tokenizer": "metaspace", "byte_fallback": True}),
    "char BPE metaspace": lambda: tokenizers_encoder({"byte_level": False, "pre_tokenizer": "metaspace"}),
    "Unigram": lambda: tokenizers_encoder({"algorithm": "unigram"}),
    "Unigram + byte fallback": lambda: tokenizers_encoder({"algorithm": "unigram", "byte_fallback": True}),
    "sentencepiece unigram": lambda: sentencepiece_encoder("unigram"),
    "sentencepiece bpe": lambda: sentencepiece_encoder("bpe"),
    "sentencepiece bpe tokenizer.json": lambda: TokenizersEncoder("v", Tokenizer.from_str(train_sentencepiece(
        resolve_spec({"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 3000, "byte_fallback": True}),
        lines()).tokenizer_json)),
    "tiktoken rank file": rank_file_encoder,
    "WordPiece": lambda: tokenizers_encoder({"algorithm": "wordpiece"}),
    "WordPiece, whitespace split": lambda: TokenizersEncoder("v", _with(
        tokenizers_encoder({"algorithm": "wordpiece"}).tokenizer, pre_tokenizer={"type": "WhitespaceSplit"})),
    "tiktoken cl100k_base": lambda: reference_encoder("cl100k_base"),
}


@pytest.mark.parametrize("kind", ENCODERS)
def test_spelled_lines_get_the_exact_spans_and_round_trips(kind):
    encoder = ENCODERS[kind]()
    assert encoder.spelling is not None
    text = lines(40, offset=500) + ADVERSARIAL
    fast, exact = encoder.encode_batch(text), encoder._exact(text)
    assert fast.flat.tolist() == exact.flat.tolist() and fast.counts.tolist() == exact.counts.tolist()
    # tokenizers' Unigram gives a whole run of unknown characters to each of its bytes; the
    # spelling gives each byte the character holding it, inside that run.
    byte = np.isin(fast.flat, list(encoder.byte_fallback_ids))
    assert (fast.spans[~byte] == exact.spans[~byte]).all()
    assert (exact.spans[byte, 0] <= fast.spans[byte, 0]).all() and (fast.spans[byte, 1] <= exact.spans[byte, 1]).all()
    assert fast.roundtrips == exact.roundtrips
    spelled = encoder.spelling.check(text, fast.flat, fast.counts).spelled
    # Most lines take the fast path; the literal "▁" lines never do on the "▁" kinds.
    assert spelled.mean() > 0.65
    if encoder.spelling.dummy_prefix:
        assert not any(spelled[i] for i, line in enumerate(text) if "\u2581" in line)


def test_tokenizer_json_spans_are_its_offsets():
    encoder = ENCODERS["char BPE + byte fallback"]()
    text = lines(40, offset=500) + ADVERSARIAL
    spelled, _, spans = encoder.spelling.check(text, *encoder._ids(text))
    offsets = encoder._exact(text)
    keep = np.repeat(spelled, offsets.counts)
    assert (spans[keep] == offsets.spans[keep]).all() and keep.mean() > 0.7


def test_ids_that_spell_other_bytes_are_caught_line_by_line():
    spelling = Spelling.of([b"a", b"b", b" ", b"\xc3\xa9", None])
    text = ["ab", "ba", "é a", "", "a?"]
    flat = np.array([0, 1, 1, 0, 3, 2, 0, 0, 4])
    counts = np.array([2, 2, 3, 0, 2])
    spelled, roundtrips, spans = spelling.check(text, flat, counts)
    assert spelled.tolist() == roundtrips.tolist() == [True, True, True, True, False]
    assert spans[:7].tolist() == [[0, 1], [1, 2], [0, 1], [1, 2], [0, 1], [1, 2], [2, 3]]
    # Same byte counts, other bytes: only that line is out.
    swapped = np.array([1, 0, 1, 0, 3, 2, 0, 0, 4])
    assert spelling.check(text, swapped, counts)[0].tolist() == [False, True, True, True, False]


def test_a_dummy_prefix_stands_for_no_byte():
    spelling = Spelling.of([b" a", b"b", b" "], dummy_prefix=True)
    spelled, _, spans = spelling.check(["ab", " b", "ab"], np.array([0, 1, 2, 2, 1, 0]), np.array([2, 3, 1]))
    assert spelled.tolist() == [True, True, False]
    assert spans[:5].tolist() == [[0, 1], [1, 2], [0, 1], [0, 1], [1, 2]]  # the lone dummy belongs to the first word


def test_only_whitespace_is_left_out_of_wordpiece_spelling():
    from tokenizers.pre_tokenizers import Whitespace

    from tokenmill.evaluation.spelling import _WHITE_SPACE

    split = Whitespace()
    for code in range(0x3002):
        character = chr(code)
        dropped = split.pre_tokenize_str(f"a{character}b") == [("a", (0, 1)), ("b", (2, 3))]
        assert _WHITE_SPACE[code] == dropped, hex(code)


def test_wordpiece_round_trips_follow_the_decoders_spaces():
    encoder = ENCODERS["WordPiece"]()
    text = ["Hello, world.", "Hello ,world", "a  b", " a", "a ", "a\tb", "", " ", "x.y", "(quoted) \"text\"",
            "it's", "I do not", "rock ' n ' roll", "end?! yes", "##hash", "1,000.5"]
    ids, counts = encoder._ids(text)
    checked = encoder.spelling.check(text, ids, counts)
    decoded = encoder.tokenizer.decode_batch(encoder.encode(text), skip_special_tokens=False)
    assert checked.spelled[:13].all()  # "##hash" is not: a word's first piece "##" reads as a later piece
    spelled = checked.spelled.tolist()
    assert [ok for ok, keep in zip(checked.roundtrips.tolist(), spelled) if keep] == \
        [back == line for line, back, keep in zip(text, decoded, spelled) if keep]
    assert checked.roundtrips.tolist()[:8] == [True, False, False, False, False, False, True, False]
