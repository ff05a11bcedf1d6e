"""Byte-level BPE trained with rustbpe: the pipeline tokenizers would build, every file, the same ids in each."""

import contextlib
import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import regex

from tests.combinations import TORTURE
from tests.loaders import encoders
from tests.services import FIXTURES
from tests.text import flores_lines
from tokenmill.errors import InvalidCorpus
from tokenmill.formats.tiktoken_format import BYTE_DECODER
from tokenmill.training import with_tokenizers
from tokenmill.training.patterns import PATTERNS
from tokenmill.training.spec import resolve_spec, rustbpe_refusal
from tokenmill.training.version_files import version_contents
from tokenmill.training.with_rustbpe import check_pattern, merge_pairs, train_rustbpe

REPO = Path(__file__).resolve().parents[2]
LANGUAGES = ("eng_Latn", "spa_Latn", "deu_Latn", "rus_Cyrl", "ell_Grek", "arb_Arab", "hin_Deva", "tha_Thai",
             "zho_Hans", "jpn_Jpan", "kor_Hang", "amh_Ethi", "vie_Latn")
SPECIALS = ["<|endoftext|>", "<|pad|>", "<|user|>"]
# Letters, each digit alone, whitespace, and runs of anything else: no token may join two of them.
CUSTOM = r"[A-Za-z]+|\d|\s+|[^A-Za-z\d\s]+"


def head(path: Path, count: int, skip: int = 0) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(skip + count), handle)][skip:]


@pytest.fixture(scope="module")
def training_lines() -> list[str]:
    texts = head(FIXTURES / "manpages" / "eng_Latn.txt", 3000) + head(FIXTURES / "code" / "python.txt", 1500)
    texts += head(FIXTURES / "fortunes" / "rus_Cyrl.txt", 300)
    return texts + flores_lines(150, 0, LANGUAGES)


@pytest.fixture(scope="module")
def held_out_lines() -> list[str]:
    # Text the tokenizers never saw: other FLORES sentences in every script, code, and the torture lines.
    texts = flores_lines(30, 600, LANGUAGES) + head(FIXTURES / "code" / "python.txt", 200, skip=2000)
    texts += head(FIXTURES / "manpages" / "eng_Latn.txt", 100, skip=3000)
    return texts + TORTURE + ["Emoji: 😀👍🏽 🇪🇸 — ok?", "def f(x):\n\tif x  >= 10_000:\n\t\treturn {'a': [1]}  \n\n"]


def folder_of(spec, tokenizer, tmp_path: Path) -> Path:
    folder = tmp_path / "version"
    folder.mkdir()
    for name, data in version_contents(spec, tokenizer, {}, {}).items():
        (folder / name).write_bytes(data)
    return folder


def token_bytes(tokenizer) -> dict[int, bytes]:
    """Every learned (non-special) token's raw bytes by id."""
    specials = {added.content for added in tokenizer.get_added_tokens_decoder().values()}
    vocab = tokenizer.get_vocab().items()
    return {i: bytes(BYTE_DECODER[c] for c in token) for token, i in vocab if token not in specials}


def texts_of(tokenizer) -> list[str]:
    """The merged tokens (the 256 single bytes aside) that are whole UTF-8 text."""
    out = []
    for data in token_bytes(tokenizer).values():
        if len(data) == 1:
            continue
        with contextlib.suppress(UnicodeDecodeError):
            out.append(data.decode())
    return out


@pytest.mark.parametrize("preset", ["gpt2", "cl100k", "o200k", "custom"])
@pytest.mark.slow
def test_every_file_gives_the_same_ids_on_multilingual_text(preset, training_lines, held_out_lines, tmp_path):
    raw = {"pre_tokenizer": "none", "pre_tokenizer_regex": CUSTOM} if preset == "custom" else {"pre_tokenizer": preset}
    spec = resolve_spec({"vocab_size": 3000, "special_tokens": SPECIALS, **raw})
    folder = folder_of(spec, train_rustbpe(spec, training_lines), tmp_path)
    assert {p.name for p in folder.iterdir()} == {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                                  "vocab.json", "merges.txt", "tokenizer.tiktoken", "manifest.json"}
    found = encoders(folder)
    assert set(found) == {"tokenizer.json", "transformers", "vocab.json+merges.txt", "tiktoken"}
    expected = [found["tokenizer.json"](text) for text in held_out_lines]
    for name, encode in found.items():
        assert [encode(text) for text in held_out_lines] == expected, name
    assert sum(map(len, expected)) > 20_000  # the comparison covered real volume
    assert max(max(ids) for ids in expected if ids) > 2000  # and learned tokens, not only bytes


@pytest.mark.slow
def test_vocabulary_is_the_spec_size_with_specials_then_bytes_as_tokenizers_numbers_them(training_lines):
    spec = resolve_spec({"vocab_size": 2500, "special_tokens": SPECIALS})
    tokenizer = train_rustbpe(spec, training_lines)
    assert tokenizer.get_vocab_size() == 2500
    assert sorted(tokenizer.get_vocab().values()) == list(range(2500))
    expected = json.loads(with_tokenizers.train(spec, training_lines).to_str())
    data = json.loads(tokenizer.to_str())
    # Normalizer, pre-tokenizer, decoder, added tokens, model options: all as tokenizers trains them.
    assert {k: v for k, v in data.items() if k != "model"} == {k: v for k, v in expected.items() if k != "model"}
    model, reference = data.pop("model"), expected.pop("model")
    assert {k: v for k, v in model.items() if k not in ("vocab", "merges")} == \
        {k: v for k, v in reference.items() if k not in ("vocab", "merges")}
    first = 3 + 256
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])[:first]
    assert by_id == sorted(reference["vocab"].items(), key=lambda item: item[1])[:first]
    assert len(model["merges"]) == 2500 - first


def test_special_tokens_have_the_lowest_ids_in_every_file(training_lines, tmp_path):
    spec = resolve_spec({"vocab_size": 1000, "special_tokens": SPECIALS})
    tokenizer = train_rustbpe(spec, training_lines)
    assert [tokenizer.token_to_id(t) for t in SPECIALS] == [0, 1, 2]
    assert tokenizer.decode([0, 1], skip_special_tokens=False) == "<|endoftext|><|pad|>"
    folder = folder_of(spec, tokenizer, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["tiktoken"]["special_tokens"] == {t: i for i, t in enumerate(SPECIALS)}
    text = "end<|endoftext|> of <|user|>text"
    ids = tokenizer.encode(text, add_special_tokens=False).ids
    assert 0 in ids and 2 in ids
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    enc = tiktoken.Encoding(name="v", pat_str=manifest["tiktoken"]["pat_str"],
                            mergeable_ranks=load_tiktoken_bpe(str(folder / "tokenizer.tiktoken")),
                            special_tokens=manifest["tiktoken"]["special_tokens"])
    assert enc.encode(text, allowed_special="all") == ids
    assert json.loads((folder / "special_tokens_map.json").read_text())["additional_special_tokens"] == SPECIALS[1:]


@pytest.mark.slow
def test_a_preset_regex_is_honoured(training_lines):
    # gpt2 lets a space lead a run of digits of any length; cl100k splits digits in threes, with no space.
    gpt2 = texts_of(train_rustbpe(resolve_spec({"vocab_size": 4000, "pre_tokenizer": "gpt2"}), training_lines))
    cl100k = texts_of(train_rustbpe(resolve_spec({"vocab_size": 4000, "pre_tokenizer": "cl100k"}), training_lines))
    assert any(regex.fullmatch(r" \d+", t) for t in gpt2) and any(regex.search(r"\d{4}", t) for t in gpt2)
    assert not any(regex.search(r"\d{4}| \d", t) for t in cl100k)
    # gpt2's pieces are contractions, whitespace, or one optional space and then letters, digits or other signs.
    piece = r"'(s|t|re|ve|m|ll|d)|\s+| ?(\p{L}+|\p{N}+|[^\s\p{L}\p{N}]+)"
    assert [t for t in gpt2 if not regex.fullmatch(piece, t)] == []
    assert not any(regex.search(r"\p{L}\p{N}|\p{N}\p{L}", t) for t in cl100k)


def test_a_custom_regex_is_honoured(training_lines):
    spec = resolve_spec({"vocab_size": 3000, "pre_tokenizer": "none", "pre_tokenizer_regex": CUSTOM})
    tokens = texts_of(train_rustbpe(spec, training_lines))
    assert len(tokens) > 2500
    assert [t for t in tokens if len(regex.findall(CUSTOM, t)) != 1] == []
    assert not any(regex.search(r"\d\d| [a-z]", t) for t in tokens)


@pytest.mark.slow
def test_normalization_and_lowercase_are_applied_before_training(training_lines, tmp_path):
    shouting = [line.upper() for line in training_lines[:3000]] + ["ＦＵＬＬ ＷＩＤＴＨ ﬁne ﬂow ①②③"] * 300
    spec = resolve_spec({"vocab_size": 3000, "normalization": "nfkc", "lowercase": True})
    tokenizer = train_rustbpe(spec, shouting)
    tokens = texts_of(tokenizer)
    assert all(t == unicodedata.normalize("NFKC", t).lower() for t in tokens)
    assert {"full", " width", " fine", " flow", " 123"} <= set(tokens)
    # The same text without the normalizer learns capitals: the check above can fail.
    plain = texts_of(train_rustbpe(resolve_spec({"vocab_size": 3000}), shouting))
    assert any(t != t.lower() for t in plain)
    assert tokenizer.encode("FULL WIDTH ﬁne").ids == tokenizer.encode("full width fine").ids
    folder = folder_of(spec, tokenizer, tmp_path)
    assert not (folder / "tokenizer.tiktoken").exists()  # tiktoken does not normalize; the manifest says so
    found = encoders(folder)
    assert set(found) == {"tokenizer.json", "transformers", "vocab.json+merges.txt"}
    sample = TORTURE + [line.upper() for line in training_lines[:200]]
    expected = [found["tokenizer.json"](text) for text in sample]
    assert all([encode(text) for text in sample] == expected for encode in found.values())


TRAIN = """
import hashlib, sys
from tests.services import FIXTURES
from tokenmill.training.with_rustbpe import train_rustbpe
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents
lines = []
for lang in ("eng_Latn", "deu_Latn", "zho_Hans", "arb_Arab"):
    lines += (FIXTURES / "parallel_flores200_dev" / f"{lang}.txt").read_text().splitlines()[:300]
spec = resolve_spec({"vocab_size": 3000, "special_tokens": ["<|endoftext|>", "<|pad|>"]})
files = version_contents(spec, train_rustbpe(spec, iter(lines)), {}, {})
print(hashlib.sha256(b"".join(name.encode() + files[name] for name in sorted(files))).hexdigest())
"""


@pytest.mark.slow
def test_the_same_texts_give_byte_identical_files_in_other_processes():
    def digest(seed: str) -> str:
        env = {"PYTHONHASHSEED": seed, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        return subprocess.run([sys.executable, "-c", TRAIN], cwd=REPO, env=env, capture_output=True, text=True,
                              check=True).stdout.strip()

    first = digest("1")
    assert len(first) == 64 and first == digest("2")


@pytest.mark.slow
def test_merges_are_near_those_of_tokenizers_and_compress_as_well(training_lines, held_out_lines):
    # Both take the most frequent pair and break ties by lower id, but number single bytes differently
    # (raw byte value here, GPT-2 character there), so equal counts can be merged in another order.
    spec = resolve_spec({"vocab_size": 4000})
    ours, theirs = train_rustbpe(spec, training_lines), with_tokenizers.train(spec, training_lines)
    assert theirs.get_vocab_size() == ours.get_vocab_size() == 4000  # min_frequency 2 did not stop tokenizers
    mine, reference = set(ours.get_vocab()), set(theirs.get_vocab())
    assert len(mine & reference) / len(reference) > 0.99
    merges = [json.loads(t.to_str())["model"]["merges"] for t in (ours, theirs)]
    assert merges[0][:20] == merges[1][:20]  # the frequent merges have no ties
    assert merges[0] != merges[1]  # and the rare ones do: they are not the same list
    def count(tokenizer) -> int:
        return sum(len(e.ids) for e in tokenizer.encode_batch(held_out_lines, add_special_tokens=False))

    assert count(ours) == pytest.approx(count(theirs), rel=0.005)


def test_merge_pairs_are_found_again_from_the_ranks():
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc", b"bc", b"bcbc", b"xabc"]
    assert merge_pairs(tokens) == [(b"a", b"b"), (b"ab", b"c"), (b"b", b"c"), (b"bc", b"bc"), (b"x", b"abc")]
    # "ab" then "bc" make "abc" as (ab, c): an "abc" spelled as (a, bc) would be a second rank for one token.
    with pytest.raises(ValueError, match="rank 258"):
        merge_pairs([bytes([b]) for b in range(256)] + [b"ab", b"abc", b"abc"])
    with pytest.raises(ValueError, match="not one merge"):
        merge_pairs([bytes([b]) for b in range(256)] + [b"abc"])


def test_a_special_token_spelled_like_a_byte_token_is_refused(training_lines):
    # Both would want the id of "a"; tiktoken would then miss a single byte.
    spec = resolve_spec({"vocab_size": 1000, "special_tokens": ["<|endoftext|>", "a"]})
    with pytest.raises(ValueError, match="special token 'a' is also a learned token"):
        train_rustbpe(spec, training_lines[:500])


@pytest.mark.slow
def test_a_generator_is_streamed_and_gives_what_a_list_gives_in_any_order(training_lines):
    spec = resolve_spec({"vocab_size": 1500})
    streamed = train_rustbpe(spec, (line for line in training_lines)).to_str()
    assert streamed == train_rustbpe(spec, training_lines).to_str()
    assert streamed == train_rustbpe(spec, training_lines[::-1]).to_str()  # counts are sums


@pytest.mark.parametrize(("raw", "field"), [
    ({"byte_level": False, "pre_tokenizer": "metaspace"}, "algorithm"),
    ({"pre_tokenizer": "none"}, "pre_tokenizer"),
    ({"split_digits": True}, "split_digits"),
    ({"max_token_length": 16}, "max_token_length"),
])
def test_what_rustbpe_cannot_train_is_refused_by_field(raw, field):
    spec = resolve_spec({"vocab_size": 1000, **raw})
    assert rustbpe_refusal(spec).startswith(field)
    with pytest.raises(ValueError, match=f"spec.{field}"):
        train_rustbpe(spec, ["some text"])


def test_a_pattern_rustbpe_cannot_compile_is_refused():
    check_pattern(PATTERNS["cl100k"])
    with pytest.raises(ValueError, match="Invalid regex"):
        check_pattern(r"[a-")


@pytest.mark.slow
def test_a_document_the_regex_engine_gives_up_on_fails_with_a_message_and_the_next_training_works():
    spec = resolve_spec({"vocab_size": 300})
    # fancy_regex (rustbpe's and tiktoken's engine) overflows its stack on gpt2's `\s+(?!\S)` here.
    with pytest.raises(InvalidCorpus, match="regex engine gave up on a document"):
        train_rustbpe(spec, ["fine text", " " * 1_000_000 + "x"])
    assert 257 < train_rustbpe(spec, ["fine text"] * 10).get_vocab_size() < 300  # fewer pairs than room


def test_texts_cross_the_pipe_whole_in_batches():
    import io

    from tokenmill.training.text_frames import read_texts, write_texts

    texts = ["a", "", "héllo\nworld", "\ud800 lone", "日本語" * 1000, "\x00"]
    pipe = io.BytesIO()
    write_texts(pipe, texts[:2])
    write_texts(pipe, texts[2:])
    pipe.seek(0)
    assert list(read_texts(pipe)) == texts
