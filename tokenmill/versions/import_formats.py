"""A tokenizer a team already has, imported as a version: every file the project derives from it.

Three formats are recognised by their bytes, not their names:
- a Hugging Face `tokenizer.json` (any model: BPE, WordPiece, Unigram, with its normalizer,
  pre-tokenizer, post-processor and added tokens), kept byte for byte;
- a sentencepiece model (`tokenizer.model`), kept, with the tokenizer.json it converts to
  (tokenmill.training.with_sentencepiece) and its `tokenizer.vocab`;
- a tiktoken rank file (base64 token, space, rank, one a line) with its `pat_str` and special
  tokens, from which a byte-level BPE tokenizer.json is built whose ids are the ranks.
Then the HF folder (tokenizer_config.json, special_tokens_map.json), `vocab.json`/`merges.txt`
for BPE, and `tokenizer.tiktoken` for byte-level BPE split by one regex, each only where it
encodes to the ids the source does on PROOF_TEXT (the manifest says why a file is missing).

`imported_files` parses bytes a user uploaded: it runs in a sandbox process (bounded in time and
memory, on the team's share: tokenmill.sandboxed.sandbox), never in the API's. The regexes the
tokenizer splits with are probed afterwards like a custom `pre_tokenizer_regex`.

Deliberately not handled: fetching a tokenizer by name from a hub (the user uploads the file),
tokenizers whose `tokenizer.json` the pinned `tokenizers` cannot load, and tiktoken files for
byte-level BPE whose pipeline tiktoken cannot reproduce (normalizers, several split regexes).
"""

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

from tokenmill.errors import InvalidInput
from tokenmill.formats.tiktoken_format import byte_level_token, encoding, rank_file, tiktoken_ranks
from tokenmill.training.export import TIKTOKEN_FILE, _json, bpe_files, sha256
from tokenmill.training.spec import TrainingSpec

NOT_A_TOKENIZER = "neither a tokenizer.json, a sentencepiece model nor a tiktoken rank file"
# Text every derived file must encode to the source's ids: several scripts, digits, code, spacing.
PROOF_TEXT = ("The quick brown fox jumps over 13 lazy dogs; naïve café — 1234567 + 89.\n"
              "  def f(x):\n\treturn x ** 2  # ok\nДобрый день! 你好，世界。 مرحبا بالعالم 😀 ελληνικά")
POSSESSIVE_INTERVAL = re.compile(r"(\{\d+(?:,\d*)?\})\+")  # `{1,3}+`: possessive in tiktoken's engine


@dataclass
class Imported:
    """What an import makes: the version's files (manifest excepted), its descriptive spec, its
    vocabulary size, the source's format, and the regexes it splits with (to be probed)."""

    files: dict[str, bytes]
    spec: dict[str, Any]
    vocab_size: int
    source_format: str
    patterns: list[str]
    notes: list[str] = field(default_factory=list)
    tiktoken: dict[str, Any] = field(default_factory=dict)


def imported_files(data: bytes, pat_str: str | None = None, special_tokens: dict[str, int] | None = None) -> Imported:
    """Every file of a version made from an uploaded tokenizer (InvalidInput naming `file`,
    `pat_str` or `special_tokens` when it is not one). Runs in a sandbox process."""
    stripped = data.lstrip()
    if stripped.startswith(b"{"):
        return _from_tokenizer_json(data)
    if _looks_like_rank_file(stripped):
        return _from_rank_file(data, pat_str, special_tokens or {})
    proto = _sentencepiece_proto(data)
    if proto is not None:
        return _from_sentencepiece(data, proto)
    raise InvalidInput(f"file: {NOT_A_TOKENIZER}", field="file")


# ---- Hugging Face tokenizer.json -------------------------------------------------------------

def _from_tokenizer_json(data: bytes) -> Imported:
    try:
        text = data.decode("utf-8")
        tokenizer = Tokenizer.from_str(text)
    except (UnicodeDecodeError, Exception) as exc:  # the Rust binding raises a plain Exception
        raise InvalidInput(f"file: a JSON file the tokenizers library does not load as a tokenizer.json ({exc})"[:500],
                           field="file") from None
    parsed = json.loads(text)
    spec = _described(parsed, tokenizer, library="tokenizers")
    files = {"tokenizer.json": data}
    return _with_exports(files, parsed, tokenizer, spec, "tokenizer.json")


def _described(parsed: dict[str, Any], tokenizer: Tokenizer, library: str) -> dict[str, Any]:
    """A spec that says what the tokenizer is, in the fields trained versions use (it trained nothing)."""
    model = parsed.get("model") or {}
    algorithm = {"BPE": "bpe", "WordPiece": "wordpiece", "Unigram": "unigram"}.get(str(model.get("type")), "bpe")
    patterns = split_patterns(parsed.get("pre_tokenizer"))
    byte_level = _has_type(parsed.get("pre_tokenizer"), "ByteLevel") or _has_type(parsed.get("decoder"), "ByteLevel")
    specials = [t["content"] for t in parsed.get("added_tokens") or [] if t.get("special")]
    # Every field a trained version's spec has (their defaults), then what this tokenizer is.
    return {**TrainingSpec.model_construct().model_dump(), "algorithm": algorithm, "library": library, "vocab_size": tokenizer.get_vocab_size(),
            "byte_level": byte_level, "byte_fallback": bool(model.get("byte_fallback")),
            "pre_tokenizer": "none" if patterns else None, "pre_tokenizer_regex": patterns[0] if len(patterns) == 1 else None,
            "normalization": "none" if parsed.get("normalizer") is None else "imported",
            "special_tokens": specials, "imported": True}


def split_patterns(node: Any) -> list[str]:
    """Every regex a pre-tokenizer (as tokenizer.json writes it) splits with, in Sequences too."""
    if not isinstance(node, dict):
        return []
    pattern = node.get("pattern") or {}
    found = [pattern["Regex"]] if node.get("type") == "Split" and isinstance(pattern, dict) and "Regex" in pattern else []
    for child in node.get("pretokenizers") or []:
        found += split_patterns(child)
    return found


def _has_type(node: Any, kind: str) -> bool:
    if not isinstance(node, dict):
        return False
    return node.get("type") == kind or any(_has_type(child, kind) for key in ("pretokenizers", "decoders")
                                           for child in node.get(key) or [])


def _with_exports(files: dict[str, bytes], parsed: dict[str, Any], tokenizer: Tokenizer, spec: dict[str, Any],
                  source_format: str) -> Imported:
    """The HF folder's config files, vocab.json/merges.txt for BPE and a tiktoken file where one reproduces the ids."""
    imported = Imported(files=files, spec=spec, vocab_size=tokenizer.get_vocab_size(), source_format=source_format,
                        patterns=split_patterns(parsed.get("pre_tokenizer")))
    files["tokenizer_config.json"] = _json(_tokenizer_config(parsed))
    files["special_tokens_map.json"] = _json(_special_tokens_map(parsed))
    if spec["algorithm"] == "bpe":
        files.update(bpe_files(tokenizer.to_str()))
    if spec["byte_level"] and len(imported.patterns) == 1 and TIKTOKEN_FILE not in files:
        imported.tiktoken = _tiktoken_export(files, tokenizer, imported.patterns[0])
    elif TIKTOKEN_FILE not in files:
        imported.tiktoken = {"file": None, "reason": "tiktoken reproduces byte-level BPE split by one regex only"}
    return imported


def _tokenizer_config(parsed: dict[str, Any]) -> dict[str, Any]:
    return {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 1000000000000000019884624838656,
            "clean_up_tokenization_spaces": False, **_special_tokens_map(parsed)}


def _special_tokens_map(parsed: dict[str, Any]) -> dict[str, Any]:
    specials = [t["content"] for t in parsed.get("added_tokens") or [] if t.get("special")]
    roles: dict[str, Any] = {}
    unk = (parsed.get("model") or {}).get("unk_token")
    if unk in specials:
        roles["unk_token"] = unk
    if specials:
        roles["additional_special_tokens"] = [token for token in specials if token != unk]
    return roles


def _tiktoken_export(files: dict[str, bytes], tokenizer: Tokenizer, pattern: str) -> dict[str, Any]:
    """tokenizer.tiktoken, kept only if tiktoken encodes PROOF_TEXT to the tokenizer's own ids."""
    try:
        ranks, specials = tiktoken_ranks(tokenizer.to_str())
        tiktoken_ids = encoding("imported", ranks, specials, pattern).encode(PROOF_TEXT, disallowed_special=())
    except (ValueError, BaseException) as exc:  # tiktoken's regex engine may panic (a BaseException)
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return {"file": None, "reason": str(exc)[:300]}
    if tiktoken_ids != tokenizer.encode(PROOF_TEXT, add_special_tokens=False).ids:
        return {"file": None, "reason": "tiktoken does not encode to the tokenizer's ids (its pipeline has steps "
                                        "tiktoken lacks)"}
    files[TIKTOKEN_FILE] = rank_file(ranks)
    return {"file": TIKTOKEN_FILE, "pat_str": pattern, "special_tokens": specials}


# ---- tiktoken rank files -------------------------------------------------------------------

def _looks_like_rank_file(data: bytes) -> bool:
    first = data.split(b"\n", 1)[0].split()
    if len(first) != 2 or not first[1].isdigit():
        return False
    try:
        base64.b64decode(first[0], validate=True)
    except binascii.Error:
        return False
    return True


def _from_rank_file(data: bytes, pat_str: str | None, special_tokens: dict[str, int]) -> Imported:
    from tokenmill.formats.tiktoken_format import parse_rank_file

    if not pat_str:
        raise InvalidInput("pat_str: a tiktoken rank file needs the regex it splits text with (its pat_str)",
                           field="pat_str")
    try:
        ranks = parse_rank_file(data)
    except ValueError as exc:
        raise InvalidInput(f"file: {exc}", field="file") from None
    if len(set(ranks.values())) != len(ranks):
        raise InvalidInput("file: a tiktoken rank file gives two tokens the same rank", field="file")
    if any(bytes([b]) not in ranks for b in range(256)):
        raise InvalidInput("file: a tiktoken rank file must rank every one of the 256 single bytes", field="file")
    if any(not isinstance(i, int) or i < 0 or i in taken for taken in [set(ranks.values())]
           for i in special_tokens.values()):
        raise InvalidInput("special_tokens: each special token needs an id of its own, none of the ranks'",
                           field="special_tokens")
    try:
        source_ids = encoding("imported", ranks, special_tokens, pat_str).encode(PROOF_TEXT, disallowed_special=())
    except BaseException as exc:
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise InvalidInput(f"pat_str: tiktoken cannot split with it ({exc})"[:300], field="pat_str") from None
    tokenizer = _matching_tokenizer(ranks, pat_str, special_tokens, source_ids)
    parsed = json.loads(tokenizer.to_str())
    spec = _described(parsed, tokenizer, library="tokenizers")
    files = {TIKTOKEN_FILE: rank_file(ranks), "tokenizer.json": tokenizer.to_str(pretty=True).encode()}
    imported = _with_exports(files, parsed, tokenizer, spec, "tiktoken")
    imported.tiktoken = {"file": TIKTOKEN_FILE, "pat_str": pat_str, "special_tokens": special_tokens}
    return imported


def _matching_tokenizer(ranks: dict[bytes, int], pat_str: str, special_tokens: dict[str, int],
                        source_ids: list[int]) -> Tokenizer:
    """A tokenizers BPE over the ranks that encodes PROOF_TEXT to tiktoken's ids. Oniguruma reads a
    possessive interval (`\\p{N}{1,3}+`) as a repetition of it, where tiktoken's engine keeps it one
    run: the pattern without the possessive mark is tried when the pattern as given disagrees."""
    for pattern in dict.fromkeys([pat_str, POSSESSIVE_INTERVAL.sub(r"\1", pat_str)]):
        tokenizer = _rank_tokenizer(ranks, pattern, special_tokens)
        if tokenizer.encode(PROOF_TEXT, add_special_tokens=False).ids == source_ids:
            return tokenizer
    raise InvalidInput("file: a tokenizer.json built from these ranks and pat_str does not encode as tiktoken does "
                       "(its regex reads differently in the tokenizers engine)", field="file")


def _rank_tokenizer(ranks: dict[bytes, int], pattern: str, special_tokens: dict[str, int]) -> Tokenizer:
    """Byte-level BPE whose ids are the ranks: each token's merge is the split tiktoken's own
    merging of its bytes ends in (every lower-ranked pair merged first)."""
    vocab = {byte_level_token(token): rank for token, rank in ranks.items()}
    vocab.update(special_tokens)  # in the model's vocabulary at their own ids (tiktoken's leave gaps)
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            left, right = _last_merge(ranks, token, rank)
            merges.append((byte_level_token(left), byte_level_token(right)))
    try:
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    except Exception as exc:
        raise InvalidInput(f"pat_str: the tokenizers regex engine refuses it ({exc})"[:300], field="pat_str") from None
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    for special, _ in sorted(special_tokens.items(), key=lambda item: item[1]):
        tokenizer.add_special_tokens([AddedToken(special, special=True)])
    return tokenizer


def _last_merge(ranks: dict[bytes, int], token: bytes, rank: int) -> tuple[bytes, bytes]:
    parts = [bytes([b]) for b in token]
    while len(parts) > 2:
        best = min(range(len(parts) - 1), key=lambda i: ranks.get(parts[i] + parts[i + 1], rank))
        merged = parts[best] + parts[best + 1]
        if ranks.get(merged, rank) >= rank:
            break
        parts[best:best + 2] = [merged]
    if len(parts) != 2:
        raise InvalidInput(f"file: the token of rank {rank} cannot be made by merging two lower-ranked tokens",
                           field="file")
    return parts[0], parts[1]



# ---- sentencepiece models ------------------------------------------------------------------

def _sentencepiece_proto(data: bytes) -> Any:
    from tokenmill.formats.sentencepiece_model import parse

    try:
        proto = parse(data)
    except Exception:  # protobuf's DecodeError, or anything a hostile file makes it raise
        return None
    return proto if len(proto.pieces) > 0 else None


def _from_sentencepiece(data: bytes, proto: Any) -> Imported:
    import sentencepiece as spm

    from tokenmill.training.with_sentencepiece import tokenizer_json, vocab_file

    try:
        processor = spm.SentencePieceProcessor(model_proto=data)
        converted = tokenizer_json(proto)
    except Exception as exc:
        raise InvalidInput(f"file: a sentencepiece model that does not load ({exc})"[:300], field="file") from None
    tokenizer = Tokenizer.from_str(converted)
    parsed = json.loads(converted)
    spec = _described(parsed, tokenizer, library="sentencepiece")
    spec["byte_fallback"] = bool(proto.trainer_spec.byte_fallback)
    files = {"tokenizer.model": data, "tokenizer.vocab": vocab_file(proto), "tokenizer.json": converted.encode()}
    imported = _with_exports(files, parsed, tokenizer, spec, "sentencepiece")
    if processor.encode(PROOF_TEXT) != tokenizer.encode(PROOF_TEXT, add_special_tokens=False).ids:
        imported.notes.append("tokenizer.json does not encode every text as the sentencepiece model does; "
                              "the model file is the reference")
    return imported


def source_digest(data: bytes) -> str:
    return sha256(data)
