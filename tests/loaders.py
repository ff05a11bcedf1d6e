"""Load a downloaded version folder in every library that reads one of its files."""

import json
from collections.abc import Callable
from pathlib import Path

import sentencepiece
import tiktoken
from tiktoken.load import load_tiktoken_bpe
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer

Encode = Callable[[str], list[int]]


def _merges_pair(folder: Path) -> Tokenizer:
    # The tokenizer.json pipeline with its model rebuilt from vocab.json + merges.txt alone.
    data = json.loads((folder / "tokenizer.json").read_text())["model"]
    options = {key: data[key] for key in ("unk_token", "continuing_subword_prefix", "end_of_word_suffix") if data.get(key)}
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.model = models.BPE.from_file(str(folder / "vocab.json"), str(folder / "merges.txt"),
                                           byte_fallback=bool(data.get("byte_fallback")),
                                           fuse_unk=bool(data.get("fuse_unk")), **options)
    return tokenizer


def encoders(folder: Path) -> dict[str, Encode]:
    """One encode function per file format in the folder, all without special tokens added."""
    manifest = json.loads((folder / "manifest.json").read_text())
    fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(folder))
    found: dict[str, Encode] = {
        "tokenizer.json": lambda text: fast.encode(text, add_special_tokens=False).ids,
        "transformers": lambda text: auto.encode(text, add_special_tokens=False),
    }
    if (folder / "merges.txt").exists():
        pair = _merges_pair(folder)
        found["vocab.json+merges.txt"] = lambda text: pair.encode(text, add_special_tokens=False).ids
    if (folder / "tokenizer.model").exists():
        processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        found["sentencepiece"] = lambda text: processor.encode(text)
    info = manifest.get("tiktoken") or {}
    if info.get("file"):
        enc = tiktoken.Encoding(name="version", pat_str=info["pat_str"], special_tokens=info["special_tokens"],
                                mergeable_ranks=load_tiktoken_bpe(str(folder / info["file"])))
        found["tiktoken"] = enc.encode_ordinary
    return found


def decoders(folder: Path) -> dict[str, Callable[[list[int]], str]]:
    """One decode function per library that can decode the folder's ids."""
    fast = Tokenizer.from_file(str(folder / "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(str(folder))
    found = {"tokenizer.json": fast.decode, "transformers": auto.decode}
    if (folder / "tokenizer.model").exists():
        processor = sentencepiece.SentencePieceProcessor(model_file=str(folder / "tokenizer.model"))
        found["sentencepiece"] = processor.decode
    return found
