"""Where a vocabulary's budget went: how many tokens are Latin, Cyrillic, Han … digits, whitespace.

Each token is read as the text it stands for (byte-level tokens decoded from GPT-2's byte
alphabet, sentencepiece's "▁" as a space, WordPiece's "##" dropped) and put in one category:
- `special`: a special token;
- `partial UTF-8`: bytes that are not whole characters (a byte-level piece of a character, a
  sentencepiece byte-fallback piece such as `<0xD0>`);
- `whitespace`, `digits`, `punctuation & symbols`: tokens made only of those;
- a script (Unicode's Script property, through the `regex` module): every letter of the token
  is of that script (Common and Inherited characters, such as spaces, marks and punctuation,
  go with any script); Hiragana and Katakana count as one, `Japanese kana`; the Indic scripts
  each by name;
- `mixed script`: letters of two or more scripts.

`vocabulary_by_script` counts a token → id map, `ranks_by_script` a tiktoken rank table
(the references). Both run in a sandbox process for a version's file (it is request data: a
200,000-token vocabulary takes about a second); the caller keeps the result.
"""

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import regex

from tokenmill.errors import SandboxError
from tokenmill.formats.tiktoken_format import BYTE_DECODER

if TYPE_CHECKING:
    from tokenmill.models import TokenizerVersion
    from tokenmill.store import ObjectStore

SCRIPTS = ("Latin", "Cyrillic", "Greek", "Armenian", "Georgian", "Arabic", "Hebrew", "Devanagari", "Bengali",
           "Gurmukhi", "Gujarati", "Oriya", "Tamil", "Telugu", "Kannada", "Malayalam", "Sinhala", "Thai", "Lao",
           "Tibetan", "Myanmar", "Khmer", "Ethiopic", "Han", "Hiragana", "Katakana", "Hangul")
KANA = "Japanese kana"
SPECIAL, PARTIAL, WHITESPACE, DIGITS, PUNCTUATION, MIXED, OTHER = (
    "special", "partial UTF-8", "whitespace", "digits", "punctuation & symbols", "mixed script", "other script")
# The order categories are shown in: scripts first (as listed), then the rest.
ORDER = (*[s for s in SCRIPTS if s not in ("Hiragana", "Katakana")], KANA, OTHER, MIXED, DIGITS, WHITESPACE,
         PUNCTUATION, PARTIAL, SPECIAL)
_SCRIPT_OF = [(regex.compile(rf"\p{{Script={name}}}"), KANA if name in ("Hiragana", "Katakana") else name)
              for name in SCRIPTS]
_LETTER = regex.compile(r"[\p{L}\p{Nl}]")
_DIGIT = regex.compile(r"\p{N}")
_NEUTRAL = regex.compile(r"[\p{Z}\s\p{P}\p{S}\p{M}\p{Cc}\p{Cf}]")
_BYTE_PIECE = regex.compile(r"<0x[0-9A-Fa-f]{2}>")


def category_of(text: str, scripts: dict[str, str | None]) -> str:
    """The category of a token's text (whole characters); `scripts` memoises each letter's script."""
    if not text or text.isspace():
        return WHITESPACE
    found: set[str] = set()
    digits = letters = 0
    for char in text:
        if _LETTER.match(char):
            letters += 1
            if char not in scripts:
                scripts[char] = next((name for pattern, name in _SCRIPT_OF if pattern.match(char)), OTHER)
            found.add(scripts[char] or OTHER)
        elif _DIGIT.match(char):
            digits += 1
        elif not _NEUTRAL.match(char):
            found.add(OTHER)
    if letters:
        return found.pop() if len(found) == 1 else MIXED
    if digits:
        return DIGITS
    return OTHER if found else PUNCTUATION


def _text_of(token: str, byte_level: bool) -> str | None:
    """The text a vocabulary entry stands for; None when it is not whole characters."""
    if byte_level and all(char in BYTE_DECODER for char in token):
        try:
            return bytes(BYTE_DECODER[char] for char in token).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if _BYTE_PIECE.fullmatch(token):
        return None
    return token.replace("\u2581", " ").removeprefix("##")


def vocabulary_by_script(vocab: Mapping[str, int], specials: Iterable[str], byte_level: bool) -> dict[str, int]:
    """How many entries of a token → id map fall in each category (ORDER), zeros left out."""
    special = set(specials)
    counts: Counter[str] = Counter()
    scripts: dict[str, str | None] = {}
    for token in vocab:
        if token in special:
            counts[SPECIAL] += 1
            continue
        text = _text_of(token, byte_level)
        counts[PARTIAL if text is None else category_of(text, scripts)] += 1
    return _ordered(counts)


def ranks_by_script(ranks: Iterable[bytes], specials: int) -> dict[str, int]:
    """The same count over a tiktoken rank table's token bytes, with its number of special tokens."""
    counts: Counter[str] = Counter({SPECIAL: specials} if specials else {})
    scripts: dict[str, str | None] = {}
    for token in ranks:
        try:
            counts[category_of(token.decode("utf-8"), scripts)] += 1
        except UnicodeDecodeError:
            counts[PARTIAL] += 1
    return _ordered(counts)


def _ordered(counts: Counter[str]) -> dict[str, int]:
    return {name: counts[name] for name in ORDER if counts[name]}


def version_by_script(tokenizer_json: str, byte_level: bool) -> dict[str, int]:
    """A version's count from its tokenizer.json (in a sandbox process)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    specials = [added.content for added in tokenizer.get_added_tokens_decoder().values() if added.special]
    return vocabulary_by_script(tokenizer.get_vocab(with_added_tokens=True), specials, byte_level)


def reference_by_script(name: str) -> dict[str, int]:
    """A reference tokenizer's count (gpt2, cl100k_base, o200k_base), from its pinned rank file."""
    from tokenmill.evaluation.references import load_reference

    encoding = load_reference(name)
    return ranks_by_script(encoding._mergeable_ranks, len(encoding._special_tokens))


# ---- the report: a version beside the references, computed in the sandbox and kept ---------------

_KEPT: dict[tuple[str, str], dict[str, int]] = {}  # (version id or reference name, tokenizer.json's sha256) → counts
_KEPT_MAX = 64
_KEPT_LOCK = threading.Lock()


def vocabulary_report(store: "ObjectStore", row: "TokenizerVersion") -> dict[str, object]:
    """A version's vocabulary by script beside the references', each counted once in a sandbox
    process on the version's team's share and kept (versions and references never change)."""
    from tokenmill.evaluation.references import REFERENCE_NAMES
    from tokenmill.versions.registry import version_file

    entry = version_file(row, "tokenizer.json")
    owner = str(row.team_id)

    def version_counts() -> dict[str, int]:
        return _counted("version_by_script", owner, store.get_bytes(entry["key"]).decode(),
                        bool(row.spec.get("byte_level")))

    def reference_counts(name: str) -> Callable[[], dict[str, int]]:
        return lambda: _counted("reference_by_script", owner, name)

    counted = [("version", f"{row.name} v{row.version}", _kept((str(row.id), entry["sha256"]), version_counts))]
    counted += [(name, name, _kept((name, ""), reference_counts(name))) for name in REFERENCE_NAMES]
    subjects = [{"key": key, "label": label, "counts": counts, "total": sum(counts.values())}
                for key, label, counts in counted]
    shown = [name for name in ORDER if any(name in counts for _, _, counts in counted)]
    return {"name": row.name, "version": row.version, "categories": shown, "subjects": subjects}


def diff_by_script(row_id: str, previous_id: str, added: Iterable[str], removed: Iterable[str],
                   byte_level: bool) -> dict[str, dict[str, int]]:
    """What a version moved between categories since the one before (the tokens of a vocabulary
    diff, counted as `vocabulary_by_script` counts), kept for the pair."""
    def count() -> dict[str, int]:
        out = {f"+{k}": v for k, v in vocabulary_by_script(dict.fromkeys(added, 0), (), byte_level).items()}
        return out | {f"-{k}": v for k, v in vocabulary_by_script(dict.fromkeys(removed, 0), (), byte_level).items()}

    both = _kept((f"diff:{previous_id}", row_id), count)
    moved = {"added": {k[1:]: v for k, v in both.items() if k[0] == "+"},
             "removed": {k[1:]: v for k, v in both.items() if k[0] == "-"}}
    return {side: {name: moved[side][name] for name in ORDER if name in moved[side]} for side in moved}


def _kept(key: tuple[str, str], make: Callable[[], dict[str, int]]) -> dict[str, int]:
    with _KEPT_LOCK:
        if key in _KEPT:
            return _KEPT[key]
    counts = make()  # outside the lock: a slow count holds no other request
    with _KEPT_LOCK:
        while len(_KEPT) >= _KEPT_MAX:
            _KEPT.pop(next(iter(_KEPT)))
        _KEPT[key] = counts
    return counts


def _counted(function: str, owner: str, *args: object) -> dict[str, int]:
    from tokenmill.errors import Busy
    from tokenmill.sandboxed import sandbox

    pool = sandbox.current()
    try:
        counts: dict[str, int] = pool.call(f"tokenmill.playground.scripts:{function}", *args, timeout=COUNT_SECONDS,
                                           owner=owner)
    except SandboxError as exc:
        raise Busy(f"the vocabulary could not be counted by script ({exc}); try again", 5) from None
    return counts


COUNT_SECONDS = 30.0
