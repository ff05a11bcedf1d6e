"""Whether the libraries can build the tokenizer a spec describes, tried at submission (issue 20.6).

`resolve_spec` holds each field to its documented limits; a spec within them can still be one a
library refuses only once it builds the tokenizer. The case found: tiktoken, loading a
version's tokenizer.tiktoken (the evaluation does, after training), compiles one regex of all
the special tokens (fancy_regex over regex-automata, whose NFA is capped at 10 MiB), and fails
past about 155,000 bytes of them in all: 1,000 tokens of 195 ASCII characters, 267 of 195
CJK ones ("Error compiling regex: Regex error: error building NFA"). Tokens sharing a prefix
take less room, so the total is a guide, not an exact rule (`SAFE_SPECIAL_BYTES`).

`unbuildable` builds what training builds, on a few words, then what a version's readers
build from its files: the library's pipeline and trainer with the special tokens (trained, so
the added vocabulary is compiled), tokenizer.json loaded again and encoding a text holding a
special token, and tiktoken's Encoding where the version has a rank file. The first failure
names the field to change: the special tokens when the same spec builds without them.

Meant to run in a bounded sandbox process (tokenmill.sandboxed.sandbox), given the spec as a
dict: it imports the training modules and the libraries, nothing of the service, and writes
no file. Deliberately not tried: the regex on real text (the submission probe and the limit
in training are for that) and sizes that only training reaches (vocab_size, the corpora).
"""

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from tokenizers import Tokenizer

from tokenmill.training.spec import TrainingSpec, default_special_tokens

# A few words in several scripts, with digits, punctuation and spaces: enough to train on and encode.
WORDS = ["Hello, world!", "héllo wörld 1234", "東京 tokyo", "def f(x):\n\treturn x  # 👋", "Привет мир"]
# Special tokens up to this many UTF-8 bytes in all always built (the smallest total seen to fail: 155,297).
SAFE_SPECIAL_BYTES = 150_000
BYTES_AND_WORDS = 512  # a vocabulary that holds the 256 bytes and every character of WORDS, besides the specials


class _Refused(Exception):
    """A library refused to build a part: which library, and its words."""

    def __init__(self, library: str, message: str) -> None:
        super().__init__(f"{library}: {message}")
        self.library = library


def unbuildable(spec: TrainingSpec | Mapping[str, Any]) -> tuple[str, str] | None:
    """(field, reason) when the libraries cannot build the tokenizer this resolved spec (or its
    `model_dump()`) describes; None when they can."""
    spec = spec if isinstance(spec, TrainingSpec) else TrainingSpec.model_validate(spec)
    try:
        _build(spec)
        return None
    except _Refused as refused:
        failure = refused
    specials = spec.special_tokens or []
    defaults = default_special_tokens(spec.algorithm, spec.library)
    if specials != defaults:
        try:
            _build(spec.model_copy(update={"special_tokens": defaults}))
        except _Refused:
            pass
        else:
            size = sum(len(token.encode("utf-8", "surrogatepass")) for token in specials)
            hint = (f"; tiktoken holds about {SAFE_SPECIAL_BYTES:,} bytes of special tokens in all, these are {size:,}: "
                    "use fewer or shorter ones" if failure.library == "tiktoken" else "")
            return ("spec.special_tokens",
                    f"spec.special_tokens: the tokenizer cannot be built with these special tokens ({failure}){hint}")
    return "spec", f"spec: the tokenizer this spec describes cannot be built ({failure})"


def _build(spec: TrainingSpec) -> None:
    # Room for every character of WORDS: a vocabulary too small for the corpus's alphabet is
    # training's to say (the corpus may need fewer characters than WORDS), not this check's.
    spec = spec.model_copy(update={"vocab_size": max(spec.vocab_size, len(spec.special_tokens or []) + BYTES_AND_WORDS)})
    tokenizer, files, tiktoken_info = _trained(spec)
    text = " ".join([*WORDS, *(spec.special_tokens or [])[:1]])
    loaded = _step("tokenizers", lambda: Tokenizer.from_str(files["tokenizer.json"].decode()))
    _step("tokenizers", lambda: (tokenizer.encode(text), loaded.encode(text)))
    if (name := tiktoken_info.get("file")) in files:
        from tokenmill.formats.tiktoken_format import encoding, parse_rank_file

        made = _step("tiktoken", lambda: encoding("buildable", parse_rank_file(files[name]),
                                                  tiktoken_info["special_tokens"], tiktoken_info["pat_str"]))
        _step("tiktoken", lambda: made.encode(text, allowed_special="all"))


def _trained(spec: TrainingSpec) -> tuple[Tokenizer, dict[str, bytes], dict[str, Any]]:
    """The tokenizer training builds, trained on WORDS; the files of a version of it, and what
    tiktoken needs besides its rank file."""
    from tokenmill.training.export import artifact_files

    extra: dict[str, bytes] = {}
    if spec.library == "sentencepiece":
        from tokenmill.training.with_sentencepiece import train_sentencepiece

        tokenizer, extra = _step("sentencepiece", lambda: train_sentencepiece(spec, WORDS).tokenizer_and_files())
    elif spec.library in ("rustbpe", "tokenmill"):
        from tokenmill.training.with_rustbpe import to_tokenizer

        tokenizer = _step("tokenizers", lambda: to_tokenizer(spec, []))  # no merge changes what is built here
    else:
        from tokenmill.training import with_tokenizers

        tokenizer = _step("tokenizers", lambda: with_tokenizers.train(spec, WORDS, regex_seconds=None))
    files, tiktoken_info = _step("tokenizers", lambda: artifact_files(spec, tokenizer))
    return tokenizer, {**extra, **files}, tiktoken_info


Result = TypeVar("Result")


def _step(library: str, work: Callable[[], Result]) -> Result:
    """What `work` returns; _Refused naming the library if it raises (or a Rust library panics)."""
    try:
        return work()
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise _Refused(library, f"{type(exc).__name__}: {str(exc)[:300]}") from None
