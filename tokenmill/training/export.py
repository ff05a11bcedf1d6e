"""The files of a version (DESIGN §5), as bytes: nothing here touches the filesystem or store.

`tokenizer.json` + `tokenizer_config.json` + `special_tokens_map.json` make the folder that
`transformers.AutoTokenizer.from_pretrained` loads; BPE adds `vocab.json` + `merges.txt`;
byte-level BPE with no normalizer adds a tiktoken rank file; sentencepiece versions add
`tokenizer.model` + `tokenizer.vocab` (see training/with_sentencepiece.py); `manifest.json`
records the spec, the lineage and the sha256 of every other file.

A spec's `sampling` defaults (tokenmill.sandboxed.subword_sampling) are recorded in the manifest's spec
only: tokenizer.json stays deterministic, since transformers, tiktoken's rank file and every
evaluation read it as the version's one segmentation. A BPE spec with `sampling.dropout_file`
also gets `tokenizer.dropout.json`, the same tokenizer with its model's `dropout` set, which
`tokenizers` and transformers load as they are (their dropout is not seeded). No other format
has a place for these defaults: a Unigram tokenizer.json keeps no alpha, a sentencepiece model
no sampling options.
"""

import hashlib
import json
from typing import Any

from tokenizers import Tokenizer

from tokenmill.training.spec import TrainingSpec
from tokenmill.training.with_tokenizers import unk_token

TIKTOKEN_FILE = "tokenizer.tiktoken"
DROPOUT_FILE = "tokenizer.dropout.json"
# transformers' sentinel for "no length limit" (int(1e30)), as its own saved configs use.
NO_MAX_LENGTH = 1000000000000000019884624838656


def _json(data: Any) -> bytes:
    return (json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False) + "\n").encode()


def special_tokens_map(spec: TrainingSpec) -> dict[str, str | list[str]]:
    """Which special tokens play the roles transformers knows (bos, eos, unk, pad …)."""
    special = list(spec.special_tokens or [])
    roles: dict[str, str | list[str]] = {}
    if (unk := unk_token(spec)) is not None:
        roles["unk_token"] = unk
    if spec.algorithm == "wordpiece":
        for role, token in (("cls_token", "[CLS]"), ("sep_token", "[SEP]"), ("pad_token", "[PAD]"), ("mask_token", "[MASK]")):
            if token in special:
                roles[role] = token
    for role, token in (("bos_token", "<s>"), ("eos_token", "</s>"), ("pad_token", "<pad>")):
        if token in special:
            roles[role] = token
    if "<|endoftext|>" in special:
        roles.setdefault("bos_token", "<|endoftext|>")
        roles.setdefault("eos_token", "<|endoftext|>")
    others = [token for token in special if token not in roles.values()]
    if others:
        roles["additional_special_tokens"] = others
    return roles


def tokenizer_config(spec: TrainingSpec) -> dict[str, Any]:
    """The config transformers reads beside tokenizer.json."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": NO_MAX_LENGTH,
        # Keep decode(encode(x)) == x: no space clean-up, no prefix space.
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
        **special_tokens_map(spec),
    }


def bpe_files(tokenizer_json: str) -> dict[str, bytes]:
    """vocab.json and merges.txt of a BPE model (the GPT-2 / RoBERTa file pair)."""
    model = json.loads(tokenizer_json)["model"]
    merges = [pair if isinstance(pair, list) else pair.split(" ") for pair in model["merges"]]
    if any(" " in part or "\n" in part for pair in merges for part in pair):
        # merges.txt separates pieces with a space: it cannot hold pieces that contain one.
        return {"vocab.json": _json(model["vocab"])}
    lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in merges]
    return {"vocab.json": _json(model["vocab"]), "merges.txt": ("\n".join(lines) + "\n").encode()}


def tiktoken_file(spec: TrainingSpec, tokenizer_json: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The .tiktoken rank file and what tiktoken needs besides it, when tiktoken can reproduce the model.

    tiktoken has no normalizer and splits with one regex, so only byte-level BPE split by a
    regex preset or a custom regex qualifies; the manifest says why a version has no rank file.
    """
    if not spec.byte_level or spec.normalization != "none" or spec.lowercase or spec.split_digits:
        return {}, {"file": None, "reason": "tiktoken reproduces byte-level BPE without normalization only"}
    if not spec.regex_pattern:
        return {}, {"file": None, "reason": "tiktoken needs a pre-tokenization regex (pre_tokenizer gpt2, cl100k, o200k or a custom regex)"}
    from tokenmill.formats.tiktoken_format import rank_file, tiktoken_ranks

    try:
        ranks, specials = tiktoken_ranks(tokenizer_json)
    except ValueError as exc:
        return {}, {"file": None, "reason": str(exc)}
    info = {"file": TIKTOKEN_FILE, "pat_str": spec.regex_pattern, "special_tokens": specials}
    return {TIKTOKEN_FILE: rank_file(ranks)}, info


def artifact_files(spec: TrainingSpec, tokenizer: Tokenizer) -> tuple[dict[str, bytes], dict[str, Any]]:
    """Every file of a tokenizers-trained version except the manifest, and the tiktoken info."""
    tokenizer_json = tokenizer.to_str(pretty=True)
    files = {
        "tokenizer.json": tokenizer_json.encode(),
        "tokenizer_config.json": _json(tokenizer_config(spec)),
        "special_tokens_map.json": _json(special_tokens_map(spec)),
    }
    if spec.algorithm == "bpe":
        files.update(bpe_files(tokenizer_json))
    tiktoken_files, tiktoken_info = tiktoken_file(spec, tokenizer_json)
    files.update(tiktoken_files)
    if spec.sampling is not None and spec.sampling.dropout_file:
        files[DROPOUT_FILE] = dropout_file(tokenizer_json, spec.sampling.dropout)
    return files, tiktoken_info


def dropout_file(tokenizer_json: str, dropout: float | None) -> bytes:
    """The tokenizer.json of a BPE version with its model's dropout set (ValueError for any other model)."""
    data = json.loads(tokenizer_json)
    if data["model"]["type"] != "BPE":
        raise ValueError(f"a {data['model']['type']} model has no dropout")
    data["model"]["dropout"] = dropout
    return _json(data)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest(spec: TrainingSpec, lineage: dict[str, Any], files: dict[str, bytes], tiktoken: dict[str, Any]) -> bytes:
    """manifest.json: the spec, the lineage and the size and sha256 of every other file."""
    return manifest_of(spec.model_dump(), lineage, files, tiktoken)


def manifest_of(spec: dict[str, Any], lineage: dict[str, Any], files: dict[str, bytes], tiktoken: dict[str, Any]) -> bytes:
    """manifest.json of a spec given as data (an imported version's describes what it is)."""
    listing = [{"name": name, "bytes": len(data), "sha256": sha256(data)} for name, data in sorted(files.items())]
    body: dict[str, Any] = {"spec": spec, "lineage": lineage, "files": listing}
    if tiktoken:
        body["tiktoken"] = tiktoken
    return _json(body)
