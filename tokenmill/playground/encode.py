"""Encoding one text for people: ids, token strings, offsets (the dashboard's playground).

A version's encode runs its own pre-tokenization regex, which a hostile pattern and text can
keep busy for minutes: it runs in `tokenmill.sandboxed.sandbox`, bounded in time and memory, and an
encode cut short is a 422 on `text`. Reference encodes (tiktoken's fixed patterns, linear in
the text: at most about 0.5 s on 100,000 characters of any one character) stay in this process,
where the three rank files are loaded once instead of once per sandbox process (about 200 MB).

With `sampling` (tokenmill.sandboxed.subword_sampling) a version's encode is sampled instead: BPE-dropout
or Unigram sampling, seeded, in the same sandbox. The result then says how (`sampling`); a
reference cannot be sampled.
"""

from collections.abc import Callable
from typing import Any

from tokenmill.errors import Failed, InvalidInput, OverMemory, TimedOut, TokenmillError
from tokenmill.evaluation.references import REFERENCE_NAMES, load_reference
from tokenmill.models import TokenizerVersion
from tokenmill.sandboxed import sandbox
from tokenmill.sandboxed.subword_sampling import SamplingOptions, resolve
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import version_file

MAX_TEXT = 100_000


def _check(text: str) -> str:
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"'text' is longer than {MAX_TEXT} characters", field="text")
    return text


def _summary(text: str, ids: list[int], tokens: list[str], offsets: list[tuple[int, int]]) -> dict[str, Any]:
    return {"ids": ids, "tokens": tokens, "offsets": [list(o) for o in offsets],
            "pieces": [text[start:end] for start, end in offsets], "count": len(ids),
            "chars_per_token": len(text) / len(ids) if ids else 0.0}


def encode_with_version(store: ObjectStore, version: TokenizerVersion, text: str,
                        sampling: SamplingOptions | None = None) -> dict[str, Any]:
    """How a version tokenizes a text (no special tokens added), in a bounded sandbox process;
    sampled (BPE-dropout, Unigram sampling) with `sampling`."""
    text = _check(text)
    pool = sandbox.current()
    owner = str(version.team_id)
    entry = version_file(version, "tokenizer.json")
    key = f"{version.id}:{entry['sha256']}"

    def tokenizer_json() -> str:
        return store.get_bytes(entry["key"]).decode()

    label = {"tokenizer": f"{version.name} v{version.version}"}
    if sampling is None:
        ids, tokens, offsets = _bounded(version, pool, "the tokenizer's pre-tokenization regex",
                                        lambda: pool.encode(key, text, tokenizer_json, owner=owner))
        return {**label, **_summary(text, ids, tokens, offsets)}
    chosen = resolve(version.spec, sampling).as_dict()
    ids, tokens, offsets = _bounded(version, pool, "sampling (or the pre-tokenization regex)",
                                    lambda: pool.sample(f"sample:{key}", text, chosen, tokenizer_json, owner=owner))
    return {**label, **_summary(text, ids, tokens, offsets), "sampling": chosen}


def _bounded(version: TokenizerVersion, pool: sandbox.Sandbox, what: str, call: Callable[[], Any]) -> Any:
    """A sandbox call, its failures as the errors a person can act on (422 on `text`, or 500)."""
    try:
        return call()
    except TimedOut:
        raise InvalidInput(f"'text': {what} took longer than {pool.timeout:g}s on this text (catastrophic "
                           "backtracking?); try a shorter or different text", field="text") from None
    except OverMemory:
        raise InvalidInput(f"'text': encoding it needed more than {pool.memory_bytes // 2**20} MiB of memory; "
                           "try a shorter text", field="text") from None
    except Failed as exc:
        if exc.kind == "error":
            raise TokenmillError(f"the tokenizer of {version.name} v{version.version} failed: {exc}") from None
        # Oniguruma panics ("retry-limit-in-match over") on a regex that backtracks too much.
        raise InvalidInput(f"'text': the tokenizer could not encode this text ({exc}): its pre-tokenization regex "
                           "backtracks too much on it", field="text") from None


def encode_with_reference(name: str, text: str) -> dict[str, Any]:
    """How GPT-2, cl100k_base or o200k_base tokenizes a text."""
    text = _check(text)
    if name not in REFERENCE_NAMES:
        raise InvalidInput(f"unknown reference {name!r}: use one of {', '.join(REFERENCE_NAMES)}", field="reference")
    encoding = load_reference(name)  # tiktoken alone: the evaluation kernels stay out of the API process
    ids = encoding.encode_ordinary(text)
    pieces = [encoding.decode_single_token_bytes(i) for i in ids]
    tokens = [piece.decode("utf-8", "replace") for piece in pieces]
    return {"tokenizer": name, **_summary(text, ids, tokens, character_spans(text, [len(p) for p in pieces]))}


def character_spans(text: str, byte_lengths: list[int]) -> list[tuple[int, int]]:
    """The characters each token's bytes touch (a token holding part of a character gets all of it)."""
    owner = [index for index, character in enumerate(text) for _ in range(len(character.encode("utf-8")))]
    spans, start = [], 0
    for length in byte_lengths:
        spans.append((owner[start], owner[start + length - 1] + 1) if length else (len(text), len(text)))
        start += length
    return spans
