"""Each token as people read it: its own text, with spaces, line breaks and stray bytes made visible.

A token is labelled by what it holds, never by the span of text it came from: a byte-fallback
token `<0xD0>` of a Cyrillic word stays `<0xD0>`, where the word's span would show the whole
word once per byte. Byte-level tokens ("Ġthe") are turned back into their bytes; bytes that do
not make a whole UTF-8 character inside the token (a character cut between two tokens) are
shown as `<0xD0>` too. Every page draws a space as ␣ (the playground, the cost report, the
diff, /bpe), a line break as ↵ and a tab as ⇥.

Deliberately not handled: WordPiece's "##" continuation mark (kept: it is part of the token's
text) and normalizers (a lowercasing version's token shows the lowercase it holds).
"""

import re
from collections.abc import Callable
from typing import Any

from tokenmill.evaluation.references import REFERENCE_NAMES, load_reference
from tokenmill.formats.tiktoken_format import BYTE_DECODER
from tokenmill.models import TokenizerVersion

GLYPHS = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")
METASPACE = "▁"


def visible(text: str) -> str:
    """Spaces, line breaks and tabs as glyphs; other control characters as <0xNN>; "∅" for nothing."""
    if not text:
        return "∅"
    return "".join(GLYPHS.get(ch) or (f"<0x{ord(ch):02X}>" if ord(ch) < 32 or ord(ch) == 127 else ch) for ch in text)


def bytes_label(data: bytes) -> str:
    """Bytes as text: each whole UTF-8 character as itself, each byte that is not part of one as <0xNN>."""
    out, i = [], 0
    while i < len(data):
        lead = data[i]
        size = 1 if lead < 0x80 else 2 if 0xC2 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF5 else 0
        try:
            if not size:
                raise UnicodeDecodeError("utf-8", data, i, i + 1, "not a lead byte")
            out.append(visible(data[i:i + size].decode("utf-8")))
            i += size
        except UnicodeDecodeError:
            out.append(f"<0x{lead:02X}>")
            i += 1
    return "".join(out) or "∅"


def version_labeller(spec: dict[str, Any]) -> Callable[[str], str]:
    """How a version's token strings read: byte-level ones as their bytes, "▁" as a space (metaspace
    and sentencepiece), byte-fallback tokens as they are."""
    if spec.get("byte_level"):
        return lambda token: (bytes_label(bytes(BYTE_DECODER[ch] for ch in token))
                              if token and all(ch in BYTE_DECODER for ch in token) else visible(token))
    spaces = spec.get("pre_tokenizer") == "metaspace" or spec.get("library") == "sentencepiece"

    def label(token: str) -> str:
        if BYTE_TOKEN.fullmatch(token):
            return token.upper().replace("0X", "0x")
        return visible(token.replace(METASPACE, " ") if spaces else token)

    return label


def token_labels(result: dict[str, Any], version: TokenizerVersion | None) -> list[str]:
    """The label of each token of an encode result: from the version's token strings, or from a
    reference's own bytes (its token strings lost the bytes of a cut character)."""
    if version is not None:
        return [version_labeller(version.spec)(token) for token in result["tokens"]]
    if result["tokenizer"] in REFERENCE_NAMES:
        encoding = load_reference(result["tokenizer"])
        return [bytes_label(encoding.decode_single_token_bytes(i)) for i in result["ids"]]
    return [visible(token) for token in result["tokens"]]
