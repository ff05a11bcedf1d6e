"""Reference tokenizers (GPT-2, cl100k_base, o200k_base), loaded offline and verified.

The rank files come from pinned PyPI distributions installed beside Tokenmill, never from
the network: `bpe-openai==0.1.4` ships cl100k_base and o200k_base (gzipped) as package
data, and `openai-whisper==20250625` ships GPT-2's r50k ranks as
`whisper/assets/gpt2.tiktoken`.
Whisper must be installed with `pip install --no-deps openai-whisper==20250625` (its
dependencies are torch and friends) and must never be imported: the file is found through
the distribution's metadata. Every file is checked against the sha256 tiktoken itself pins
before a single rank is read.

The split regexes of the three, as tokenizers trains with them, are tokenmill.training.patterns.

Deliberately not handled: other tiktoken encodings (p50k, o200k_harmony …), downloading or
caching files, and HF-format (vocab.json/merges.txt) references.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import cast

import tiktoken
from tiktoken_ext.openai_public import (
    ENDOFPROMPT,
    ENDOFTEXT,
    FIM_MIDDLE,
    FIM_PREFIX,
    FIM_SUFFIX,
    r50k_pat_str,
)

from tokenmill.errors import ReferenceFileError
from tokenmill.formats.tiktoken_format import parse_rank_file
from tokenmill.training.patterns import CL100K_PAT_STR, O200K_PAT_STR

__all__ = ["BASELINES", "BYTES", "REFERENCE_NAMES", "ReferenceFileError", "load_reference", "reference_sha256"]

REFERENCE_NAMES = ("gpt2", "cl100k_base", "o200k_base")
# The presets' names, as a spec writes them (`pre_tokenizer`, `base.reference`), to the references'.
PRESET_REFERENCES = {"gpt2": "gpt2", "cl100k": "cl100k_base", "o200k": "o200k_base"}
# One token per UTF-8 byte (ByT5's tokenization): the floor every tokenizer's compression is read
# against. A tiktoken Encoding of the 256 single bytes and no merge, split a character at a time.
BYTES = "bytes"
BASELINES = (*REFERENCE_NAMES, BYTES)  # what every evaluation and the fertility matrix carry

@dataclass(frozen=True)
class _Reference:
    distribution: str  # the PyPI distribution that ships the file
    install: str  # how to get it, for the error message
    path: str  # the file inside the distribution
    sha256: str  # of the uncompressed rank file, as pinned by tiktoken_ext.openai_public
    pat_str: str
    special_tokens: dict[str, int]
    n_vocab: int | None  # checked by tiktoken; None where special ids leave gaps, as in tiktoken


_BPE_OPENAI = "pip install bpe-openai==0.1.4"
_REFERENCES = {
    "gpt2": _Reference(
        distribution="openai-whisper",
        install="pip install --no-deps openai-whisper==20250625",
        path="whisper/assets/gpt2.tiktoken",
        sha256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
        pat_str=r50k_pat_str,
        special_tokens={ENDOFTEXT: 50256},
        n_vocab=50257,
    ),
    "cl100k_base": _Reference(
        distribution="bpe-openai",
        install=_BPE_OPENAI,
        path="bpe_openai/data/cl100k_base.tiktoken.gz",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=CL100K_PAT_STR,
        special_tokens={
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
        n_vocab=None,
    ),
    "o200k_base": _Reference(
        distribution="bpe-openai",
        install=_BPE_OPENAI,
        path="bpe_openai/data/o200k_base.tiktoken.gz",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=O200K_PAT_STR,
        special_tokens={ENDOFTEXT: 199999, ENDOFPROMPT: 200018},
        n_vocab=None,
    ),
}


def _reference(name: str) -> _Reference:
    try:
        return _REFERENCES[name]
    except KeyError:
        valid = ", ".join(REFERENCE_NAMES)
        raise ValueError(f"unknown reference tokenizer {name!r}; valid names: {valid}") from None


def _read_verified(ref: _Reference) -> bytes:
    """The uncompressed rank file of ref, after checking its sha256."""
    # Located through the distribution's file list rather than importlib.resources, which
    # would import the package: `whisper` imports torch, which is deliberately absent.
    try:
        # An installed wheel's locate_file gives a pathlib.Path; typeshed says only "SimplePath".
        path = Path(cast(os.PathLike[str], metadata.distribution(ref.distribution).locate_file(ref.path)))
        raw = path.read_bytes()
    except (metadata.PackageNotFoundError, FileNotFoundError) as exc:
        missing = f"{ref.path} from {ref.distribution} is not installed; run `{ref.install}`"
        raise ReferenceFileError(missing) from exc
    data = gzip.decompress(raw) if ref.path.endswith(".gz") else raw
    digest = hashlib.sha256(data).hexdigest()
    if digest != ref.sha256:
        raise ReferenceFileError(
            f"{path} has sha256 {digest}, expected {ref.sha256}; reinstall it with `{ref.install}`"
        )
    return data


@cache
def load_reference(name: str) -> tiktoken.Encoding:
    """The tiktoken Encoding of a reference tokenizer, from its verified local rank file (the
    byte baseline needs none)."""
    if name == BYTES:
        return tiktoken.Encoding(name=BYTES, pat_str=r"[\s\S]", mergeable_ranks={bytes([b]): b for b in range(256)},
                                 special_tokens={}, explicit_n_vocab=256)
    ref = _reference(name)
    return tiktoken.Encoding(
        name=name,
        pat_str=ref.pat_str,
        mergeable_ranks=parse_rank_file(_read_verified(ref)),
        special_tokens=ref.special_tokens,
        explicit_n_vocab=ref.n_vocab,
    )


def reference_sha256(name: str) -> str:
    """The pinned sha256 of a reference's uncompressed rank file, which load_reference checks."""
    return _reference(name).sha256


def reference_token_ids(name: str) -> dict[str, int]:
    """A reference's token → id map written as byte-level tokenizer.json writes its tokens
    ("Ġthe"), special tokens included: what an extension of it is compared with."""
    from tokenmill.formats.tiktoken_format import byte_level_token

    encoding = load_reference(name)
    vocabulary = {byte_level_token(token): rank for token, rank in encoding._mergeable_ranks.items()}
    vocabulary.update(encoding._special_tokens)
    return vocabulary

