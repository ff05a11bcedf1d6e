"""Export of byte-level BPE trained with `tokenizers` to tiktoken ranks, checked on real text."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tests.services import FIXTURES
from tokenmill.formats.tiktoken_format import encoding, parse_rank_file, rank_file, tiktoken_ranks
from tokenmill.training.patterns import PATTERNS

FLORES = FIXTURES / "parallel_flores200_dev"
LANGUAGES = ("eng_Latn", "spa_Latn", "deu_Latn", "rus_Cyrl", "ell_Grek", "arb_Arab", "heb_Hebr", "hin_Deva",
             "tam_Taml", "tha_Thai", "zho_Hans", "jpn_Jpan", "kor_Hang", "amh_Ethi", "vie_Latn", "yor_Latn")
SPECIALS = ["<|endoftext|>", "<|pad|>", "<|user|>"]
BYTE_LEVEL = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


def lines(path: Path, count: int, skip: int = 0) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in itertools.islice(handle, skip, skip + count)]


def train(texts: list[str], vocab_size: int, pattern: str) -> Tokenizer:
    """Train the way the service does: Split(pattern) + ByteLevel, full byte alphabet, specials first."""
    tok = Tokenizer(models.BPE())
    split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.pre_tokenizer = pre_tokenizers.Sequence([split, BYTE_LEVEL])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return tok


@pytest.fixture(scope="module")
def training_lines() -> list[str]:
    texts = lines(FIXTURES / "fortunes" / "eng_Latn.txt", 1500) + lines(FIXTURES / "code" / "python.txt", 500)
    for language in LANGUAGES:
        texts += lines(FLORES / f"{language}.txt", 150)
    return texts


@pytest.fixture(scope="module")
def held_out_lines() -> list[str]:
    # Lines the tokenizers never saw: other FLORES sentences, code, and hand-made edge cases.
    texts = [line for language in LANGUAGES for line in lines(FLORES / f"{language}.txt", 40, skip=600)]
    texts += lines(FIXTURES / "code" / "python.txt", 300, skip=2000)
    texts += lines(FIXTURES / "fortunes" / "zho_Hans.txt", 100, skip=1000)
    texts += [
        "Emoji: 😀👍🏽 🇪🇸 👨‍👩‍👧 — ok?",
        "def f(x):\n\tif x  >= 10_000:\n\t\treturn {'a': [1, 2]}  \n\n",
        "I'm sure they'LL say DON'T, 1234567 times… «¿Qué?»",
        "\u00a0non-breaking\u3000ideographic\u200bzero-width\r\nwindows",
    ]
    return texts


@pytest.fixture(
    scope="module", params=[(2000, "gpt2"), (8000, "cl100k"), (8000, "o200k")], ids=lambda p: f"{p[1]}-{p[0]}"
)
def trained(request, training_lines) -> tuple[Tokenizer, str]:
    vocab_size, preset = request.param
    return train(training_lines, vocab_size, PATTERNS[preset]), PATTERNS[preset]


def test_tiktoken_ids_equal_tokenizers_ids_on_held_out_text(trained, held_out_lines):
    tok, pattern = trained
    ranks, specials = tiktoken_ranks(tok.to_str())
    enc = encoding("trained", ranks, specials, pattern)

    expected = [e.ids for e in tok.encode_batch(held_out_lines, add_special_tokens=False)]
    assert enc.encode_ordinary_batch(held_out_lines) == expected
    assert sum(map(len, expected)) > 10_000  # the comparison covered real volume
    assert enc.decode_batch(expected) == held_out_lines


def test_special_token_text_needs_the_same_policy_on_both_sides(trained):
    tok, pattern = trained
    enc = encoding("trained", *tiktoken_ranks(tok.to_str()), pattern)
    text = "end<|endoftext|> of <|user|>text"
    # tokenizers matches special-token strings inside text even with add_special_tokens=False
    # (that flag only drives the post-processor); tiktoken does so only when allowed.
    assert enc.encode(text, allowed_special="all") == tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = True
    try:
        assert enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids
    finally:
        tok.encode_special_tokens = False


def test_special_tokens_keep_the_lowest_ids_and_leave_a_gap(trained):
    tok, pattern = trained
    ranks, specials = tiktoken_ranks(tok.to_str())
    assert specials == {token: i for i, token in enumerate(SPECIALS)}
    assert min(ranks.values()) == len(SPECIALS)
    assert len(ranks) == 256 + (tok.get_vocab_size() - 256 - len(SPECIALS))
    assert b"<|endoftext|>" not in ranks
    enc = encoding("trained", ranks, specials, pattern)
    assert enc.n_vocab == tok.get_vocab_size()
    assert enc.encode("<|pad|>", allowed_special="all") == [1]


def test_rank_file_round_trips(trained):
    tok, _ = trained
    ranks, _ = tiktoken_ranks(tok.to_str())
    data = rank_file(ranks)
    assert parse_rank_file(data) == ranks
    lines_ = data.decode("ascii").splitlines()
    assert len(lines_) == len(ranks)
    assert [int(line.split(" ")[1]) for line in lines_] == sorted(ranks.values())


def test_rank_file_reproduces_a_published_file_byte_for_byte():
    from importlib import metadata

    whisper = metadata.distribution("openai-whisper")
    published = Path(whisper.locate_file("whisper/assets/gpt2.tiktoken")).read_bytes()
    assert rank_file(parse_rank_file(published)) == published


@pytest.mark.parametrize("pattern", ["", r"\s*|\S+", r"x|(?=a)"])
def test_encoding_refuses_a_pattern_with_empty_matches(pattern):
    ranks = {bytes([b]): b for b in range(256)}
    with pytest.raises(ValueError, match="empty string"):
        encoding("bad", ranks, {}, pattern)


def test_parse_rank_file_names_a_bad_line():
    with pytest.raises(ValueError, match="line 2"):
        parse_rank_file(b"IQ== 0\nnot base64!! x\n")


@pytest.fixture(scope="module")
def small_byte_level(training_lines) -> Tokenizer:
    return train(training_lines[:300], 400, PATTERNS["gpt2"])


@pytest.mark.parametrize(
    ("part", "value", "reason"),
    [
        ("normalizer", normalizers.NFC(), "normalizer"),
        ("pre_tokenizer", pre_tokenizers.Whitespace(), "not byte-level"),
        ("pre_tokenizer", pre_tokenizers.ByteLevel(add_prefix_space=True), "prefix space"),
        ("pre_tokenizer", pre_tokenizers.Sequence([pre_tokenizers.Digits(), BYTE_LEVEL]), "Digits"),
    ],
    ids=["normalizer", "whitespace", "prefix-space", "digits"],
)
def test_refuses_what_tiktoken_cannot_reproduce(small_byte_level, part, value, reason):
    tok = Tokenizer.from_str(small_byte_level.to_str())
    setattr(tok, part, value)
    with pytest.raises(ValueError, match=reason):
        tiktoken_ranks(tok.to_str())


def test_refuses_merges_out_of_id_order(small_byte_level):
    data = json.loads(small_byte_level.to_str())
    merges = data["model"]["merges"]
    merges[10], merges[20] = merges[20], merges[10]
    with pytest.raises(ValueError, match=r"merge 11 .* tiktoken would reorder it"):
        tiktoken_ranks(json.dumps(data))


def test_refuses_a_character_level_bpe(training_lines):
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False)
    tok.train_from_iterator(training_lines[:300], trainer=trainer)
    with pytest.raises(ValueError, match="not byte-level"):
        tiktoken_ranks(tok.to_str())


def test_refuses_a_non_bpe_model(training_lines):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.WordPieceTrainer(vocab_size=300, show_progress=False)
    tok.train_from_iterator(training_lines[:300], trainer=trainer)
    with pytest.raises(ValueError, match="not BPE"):
        tiktoken_ranks(tok.to_str())
