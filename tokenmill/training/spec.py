"""The training spec (DESIGN §5): parsed, defaulted and checked before a job is queued.

`resolve_spec` turns what a user posted into a complete spec (every default filled in, so
a version records exactly what trained it) or raises InvalidInput naming the field.
"""

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tokenmill.db import unstorable
from tokenmill.errors import Failed, InvalidInput, OverMemory, SandboxError, TimedOut
from tokenmill.sandboxed.subword_sampling import SamplingDefaults
from tokenmill.sandboxed.subword_sampling import refusal as sampling_refusal

Algorithm = Literal["bpe", "wordpiece", "unigram"]
# rustbpe: byte-level BPE only, about twice as fast as tokenizers at half its memory; tokenmill:
# what rustbpe trains, with its files, 3 to 4 times as fast at under half the memory (BENCHMARKS.md).
Library = Literal["tokenizers", "sentencepiece", "rustbpe", "tokenmill"]
BYTE_LEVEL_LIBRARIES = ("tokenizers", "rustbpe", "tokenmill")  # where byte-level bpe is the default
PreTokenizer = Literal["gpt2", "cl100k", "o200k", "whitespace", "metaspace", "none"]
Normalization = Literal["none", "nfc", "nfkc", "nfd", "nfkd"]
Counting = Literal["streamed", "distributed"]

REGEX_PRESETS = ("gpt2", "cl100k", "o200k")
BYTE_ALPHABET = 256
MAX_VOCAB = 1_000_000
MAX_INT = 2**31 - 1  # every count and seed fits the int32 options of both libraries
MAX_SPECIAL_TOKENS = 1000  # each is a row of the vocabulary and an entry of every encoder's match table
MAX_SPECIAL_TOKEN_CHARS = 200
RESERVED = "<|reserved_{}|>"  # the placeholders of reserved_special_tokens
SENTENCEPIECE_NORMALIZATIONS = ("none", "nfkc")
SENTENCEPIECE_MAX_PIECE = 512  # sentencepiece refuses a larger max_sentencepiece_length
# A custom regex is tried at submission on texts derived from it (tokenmill.sandboxed.regex_probe), each
# piece repeated REGEX_PROBE_REPEAT times, plus REGEX_PROBES; each engine gets REGEX_PROBE_SECONDS.
REGEX_PROBE_SECONDS = 2.0
REGEX_COMPILE_SECONDS = 5.0
BUILD_SECONDS = 15.0  # building what a spec describes, on a few words, in a sandbox process  # compiling it, with each engine; the sandbox's memory limit bounds it too
REGEX_PROBE_REPEAT = 3000
REGEX_PROBES = ("a" * 3000 + "!", " " * 3000 + "x", "1" * 3000 + "a", ("ab " * 1000) + "\n\u00e9")


def json_object(value: Any) -> Any:
    """A nested spec field given as JSON text (the job form posts strings) read as its object."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            raise PydanticCustomError("json_object", "is not a JSON object") from None
    return value


class BaseSpec(BaseModel):
    """What a spec extends: a version of the team's (`tokenizer`, `version`: latest when left out)
    or a reference (`reference`). `vocab_size` is the base's, filled in at submission."""

    # What `_check_base` requires, stated in the JSON schema (the OpenAPI document): one kind of base.
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"oneOf": [
        {"required": ["tokenizer"], "properties": {"tokenizer": {"type": "string"}, "reference": {"type": "null"}}},
        {"required": ["reference"], "properties": {"reference": {"type": "string"}, "tokenizer": {"type": "null"},
                                                   "version": {"type": "null"}}},
    ]})

    tokenizer: str | None = Field(None, min_length=1, max_length=200)
    version: int | None = Field(None, ge=1, le=MAX_INT)
    reference: Literal["gpt2", "cl100k", "o200k"] | None = None
    vocab_size: int | None = Field(None, ge=1, le=MAX_VOCAB, description="the base's size (filled in at submission)")

    @model_validator(mode="before")
    @classmethod
    def _from_json_text(cls, value: Any) -> Any:
        return json_object(value)

    @property
    def label(self) -> str:
        return f"reference:{self.reference}" if self.reference else f"{self.tokenizer} v{self.version}"


class SuperwordSpec(BaseModel):
    """SuperBPE's second stage: merges up to `transition_vocab_size` as usual, then merges across
    whitespace, learned on spans between punctuation and newlines (tokenmill.jobs.extension)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transition_vocab_size: int = Field(ge=257, le=MAX_VOCAB, description="where the second stage begins")

    @model_validator(mode="before")
    @classmethod
    def _from_json_text(cls, value: Any) -> Any:
        return json_object(value)


class MixtureSpec(BaseModel):
    """The share of the training bytes each corpus gets (tokenmill.training.mixtures): by corpus
    (`weights`) or by language (`language_temperature`), `max_repeats` capping how often a
    corpus may be read over (UniMax)."""

    # What `_one_way` checks, stated in the JSON schema (the OpenAPI document): one of the two ways; weights
    # from 0 to 1e9, one of them above 0.
    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"oneOf": [
        {"required": ["weights"], "properties": {
            "weights": {"type": "object", "minProperties": 1, "additionalProperties": {"minimum": 0, "maximum": 1e9},
                        "not": {"additionalProperties": {"const": 0}}},
            "language_temperature": {"type": "null"}}},
        {"required": ["language_temperature"], "properties": {"language_temperature": {"type": "number"},
                                                              "weights": {"type": "null"}}},
    ]})

    weights: dict[str, float] | None = Field(None, max_length=1000, description=(
        "a weight per training corpus id (0 leaves the corpus out); each corpus gets its weight's share of "
        'the bytes'))
    language_temperature: float | None = Field(None, ge=0, le=1, description=(
        "each language's share is proportional to its size to this power: 1 the raw mix, 0 every language "
        'alike'))
    max_repeats: float | None = Field(None, ge=1, le=1000, description=(
        "a corpus is read at most this many times over; what it cannot take goes to the others (UniMax)"))

    @model_validator(mode="before")
    @classmethod
    def _from_json_text(cls, value: Any) -> Any:
        return json_object(value)

    @field_validator("weights")
    @classmethod
    def _canonical_ids(cls, weights: dict[str, float] | None) -> dict[str, float] | None:
        # Corpus ids as the API writes them (lowercase, hyphens), however they were posted.
        if weights is None:
            return None
        canonical = {}
        for key, weight in weights.items():
            try:
                canonical[str(uuid.UUID(key))] = weight
            except ValueError:
                canonical[key] = weight
        return canonical

    @model_validator(mode="after")
    def _one_way(self) -> "MixtureSpec":
        if (self.weights is None) == (self.language_temperature is None):
            raise PydanticCustomError("mixture", 'give either "weights" or "language_temperature"')
        if self.weights is not None:
            for key, weight in self.weights.items():
                if not 0 <= weight <= 1e9:  # NaN too
                    raise PydanticCustomError("mixture", f"weights must be numbers from 0 to 1e9: {key[:40]!r} has {weight}")
            if not any(self.weights.values()):
                raise PydanticCustomError("mixture", "at least one weight must be above 0")
        return self


def _special_tokens_schema(schema: dict[str, Any]) -> None:
    """What `_check_special_tokens` checks, stated in the JSON schema (the OpenAPI document): at most
    MAX_SPECIAL_TOKENS tokens, each once, of at most MAX_SPECIAL_TOKEN_CHARS characters, not blank, no control
    character."""
    printable = "[^\\x00-\\x1f\\x7f-\\x9f]"
    token = {"type": "string", "maxLength": MAX_SPECIAL_TOKEN_CHARS,
             "pattern": f"^{printable}*[^\\s\\x00-\\x1f\\x7f-\\x9f]{printable}*$"}
    for option in schema["anyOf"]:
        if option.get("type") == "array":
            option.update(items=token, maxItems=MAX_SPECIAL_TOKENS, uniqueItems=True)


class TrainingSpec(BaseModel):
    """A complete training spec; `None` on the optional fields means "the library default"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    algorithm: Algorithm = Field("bpe", description=(
        'How the vocabulary is learned: frequent-pair merges (bpe), likelihood merges (wordpiece) or pruning '
        'a large vocabulary (unigram).'))
    library: Library = Field("tokenizers", description=(
        'Which library trains it: Hugging Face tokenizers, Google sentencepiece, rustbpe (byte-level BPE, '
        "about twice as fast) or tokenmill (rustbpe's files, 3 to 4 times as fast, counted on every core)."))
    vocab_size: int = Field(32000, ge=1, le=MAX_VOCAB, description=(
        'How many tokens the vocabulary holds, special tokens and the base alphabet included.'))
    byte_level: bool | None = Field(None, description=(
        'Start from the 256 bytes (GPT-2 style) so no text is ever unknown; auto picks it for bpe on '
        'tokenizers.'))
    byte_fallback: bool = Field(False, description=(
        'Spell characters missing from the vocabulary as byte tokens instead of an unknown token.'))
    pre_tokenizer: PreTokenizer | None = Field(None, description=(
        'How text is cut into words before merging: a GPT regex, whitespace, or metaspace (▁ marks spaces).'))
    pre_tokenizer_regex: str | None = Field(None, min_length=1, max_length=2000, description=(
        'A custom split regex instead of the preset; it is compiled and timed when you submit.'))
    normalization: Normalization = Field("none", description='Unicode normalization applied to the text first.')
    lowercase: bool = Field(False, description='Fold the text to lower case first.')
    split_digits: bool = Field(False, description=(
        'Cut numbers into single digits, so every number is spelled digit by digit.'))
    special_tokens: list[str] | None = Field(None, json_schema_extra=_special_tokens_schema, description=(
        "Tokens kept whole and never merged, one per line; empty uses the algorithm's usual set."))
    # Placeholders (<|reserved_0|> …) after the named special tokens, as Llama 3 keeps them: ids
    # held for tokens a team adds later without moving any other id. Resolved into special_tokens.
    reserved_special_tokens: int = Field(0, ge=0, le=MAX_SPECIAL_TOKENS, description=(
        "How many placeholder special tokens (<|reserved_0|> …) follow the named ones, with stable ids."))
    min_frequency: int = Field(2, ge=0, le=MAX_INT, description=(
        'Ignore pairs (or pieces) seen fewer times than this in the corpus.'))
    max_token_length: int | None = Field(None, ge=1, le=1024, description=(
        "The longest token allowed, in characters; empty for the library's limit."))
    end_of_word_suffix: str | None = Field(None, min_length=1, max_length=10, description=(
        'A marker appended to word-final tokens (character-level bpe with whitespace splitting only).'))
    character_coverage: float = Field(0.9995, gt=0, le=1, description=(
        "Share of the corpus's characters the base alphabet must cover; rarer ones become unknown or bytes."))
    max_sentences: int | None = Field(None, ge=1, le=MAX_INT, description=(
        'Train on a seeded random sample of this many lines; empty uses every line.'))
    seed: int = Field(0, ge=0, le=MAX_INT, description=(
        'The random seed for sampling and training, recorded in the lineage.'))
    # Parity-aware BPE (Foroutan, Meister et al. 2025; tokenizers' ParityBpeTrainer): merges are
    # chosen for the language that compresses worst on a parallel dev set, the first
    # `parity_dev_lines` lines of each language's training corpus (one parallel_group).
    parity: bool = Field(False, description=(
        'Parity-aware BPE: give each merge to the language that compresses worst, so the languages of a '
        'parallel group pay closer to the same number of tokens (train on one parallel group).'))
    parity_dev_lines: int = Field(200, ge=10, le=100_000, description=(
        "With parity: how many first lines of each language's corpus form the parallel dev set."))
    # Subword regularisation defaults of the version's sampled encodes (tokenmill.sandboxed.subword_sampling): recorded
    # in its spec and manifest.json; tokenizer.json stays deterministic (tokenizer.dropout.json on request).
    sampling: SamplingDefaults | None = Field(None, description=(
        'Defaults of the playground\'s and API\'s sampled encodes, as JSON: {"dropout": 0.1} for bpe '
        '("dropout_file": true adds tokenizer.dropout.json), {"alpha": 0.1, "nbest_size": -1} for unigram; '
        "empty for none."))
    # "distributed": the corpora are counted in byte ranges by any number of workers, and the
    # merges (rustbpe) or pieces (sentencepiece) learned from the merged counts, pieces seen
    # fewer than min_frequency times left out (tokenmill.training.counting.distributed).
    counting: Counting = Field("streamed", description=(
        'distributed: cut the corpora into byte ranges counted by many workers, then learn from the merged '
        'counts (rustbpe, tokenmill or sentencepiece; pieces rarer than min_frequency dropped).'))
    # Balanced training data (tokenmill.training.mixtures): each corpus's documents repeated or
    # sampled to its share; duplicates of a document already read left out.
    mixture: MixtureSpec | None = Field(None, description=(
        'The share of the training bytes of each corpus: {"weights": {"<corpus id>": w, …}} or '
        '{"language_temperature": 0.3} (a language\'s share grows as its size to this power), with an optional '
        '"max_repeats" cap per corpus.'))
    deduplicate: bool = Field(False, description=(
        "Train on each distinct document once across all training corpora (exact duplicates dropped)."))
    # Extend a byte-level BPE (a version of the team's or a reference) with merges learned on the
    # training corpora: its tokens keep their ids, new ones follow (tokenmill.jobs.extension).
    superword: SuperwordSpec | None = Field(None, description=(
        'SuperBPE: {"transition_vocab_size": t}: merges up to t as usual, then merges across whitespace '
        "(spans between punctuation and newlines); byte-level bpe on library tokenmill."))
    base: BaseSpec | None = Field(None, description=(
        'Extend a byte-level BPE: {"tokenizer": NAME, "version": N} or {"reference": "gpt2" | "cl100k" | "o200k"}; '
        "every base token keeps its id, the new merges take the ids after."))

    @field_validator("pre_tokenizer_regex", "end_of_word_suffix")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        # PostgreSQL stores neither NUL nor a lone surrogate (the job's insert fails), and no library trains on them.
        if value is not None and (flaw := unstorable(value)):
            raise PydanticCustomError("unstorable_text", flaw)
        return value

    @property
    def regex_pattern(self) -> str | None:
        """The pre-tokenization regex this spec splits with, if any."""
        if self.pre_tokenizer_regex:
            return self.pre_tokenizer_regex
        if self.pre_tokenizer in REGEX_PRESETS:
            from tokenmill.training.patterns import PATTERNS

            pattern: str = PATTERNS[self.pre_tokenizer]  # its values come from tiktoken_ext, untyped
            return pattern
        return None


def default_special_tokens(algorithm: str, library: str) -> list[str]:
    if library == "sentencepiece":
        return ["<unk>", "<s>", "</s>"]
    if algorithm == "wordpiece":
        return ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    if algorithm == "unigram":
        return ["<unk>"]
    return ["<|endoftext|>"]


def resolve_spec(raw: dict[str, Any], owner: str | None = None) -> TrainingSpec:
    """The complete spec for what a user posted, or InvalidInput naming the first bad field.
    The work on a custom regex runs in sandbox processes on `owner`'s share (the submitting team)."""
    try:
        spec = TrainingSpec.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"]) or "spec"
        raise InvalidInput(f"spec.{field}: {error['msg']}", field=f"spec.{field}") from None
    spec = _fill_defaults(spec)
    _check_special_tokens(spec.special_tokens or [])  # first: bounded before any other work on them
    if spec.base is not None:  # its rules were checked filling the defaults; the base's own fit, at submission
        _check_vocab_size(spec)
        return spec
    _check_combination(spec)
    if spec.pre_tokenizer_regex:
        check_regex(spec.pre_tokenizer_regex, spec.library, owner)
    _check_vocab_size(spec)
    _check_buildable(spec, owner)
    return spec


def _check_buildable(spec: TrainingSpec, owner: str | None) -> None:
    """Build what the spec describes (tokenmill.training.buildable) in a sandbox process: a spec
    within every documented limit that a library still cannot build is refused now, not in training."""
    from tokenmill.sandboxed import sandbox

    pool = sandbox.current()
    try:
        why = pool.call("tokenmill.training.buildable:unbuildable", spec.model_dump(), timeout=BUILD_SECONDS,
                        owner=owner)
    except TimedOut:
        _refuse("special_tokens", f"the tokenizer this spec describes took more than {BUILD_SECONDS:g}s to build")
    except OverMemory:
        _refuse("special_tokens", f"the tokenizer this spec describes needs more than {pool.memory_bytes // 2**20} "
                                  "MiB to build")
    except Failed as exc:
        raise InvalidInput(f"spec: the tokenizer this spec describes could not be built ({exc})"[:500],
                           field="spec") from None
    if why:
        field, reason = why
        raise InvalidInput(reason if reason.startswith(f"{field}:") else f"{field}: {reason}", field=field)


def _fill_defaults(spec: TrainingSpec) -> TrainingSpec:
    if spec.base is not None:
        _check_base(spec)
        # The base decides the split and the alphabet; the merges are learned by tokenmill's rule.
        return spec.model_copy(update={
            "library": "tokenmill", "byte_level": True,
            "pre_tokenizer": spec.base.reference or "none",
            "special_tokens": spec.special_tokens if spec.special_tokens is not None else []})
    byte_level = spec.byte_level
    if byte_level is None:
        byte_level = spec.library in BYTE_LEVEL_LIBRARIES and spec.algorithm == "bpe" and not spec.byte_fallback
    pre_tokenizer = spec.pre_tokenizer
    if pre_tokenizer is None:
        if spec.library == "sentencepiece":
            pre_tokenizer = "metaspace"
        elif byte_level:
            pre_tokenizer = "gpt2"
        elif spec.algorithm == "wordpiece":
            pre_tokenizer = "whitespace"
        else:
            pre_tokenizer = "metaspace"
    special = spec.special_tokens
    if special is None:
        special = default_special_tokens(spec.algorithm, spec.library)
    if spec.reserved_special_tokens:
        special = [*special, *(RESERVED.format(i) for i in range(spec.reserved_special_tokens))]
    return spec.model_copy(update={"byte_level": byte_level, "pre_tokenizer": pre_tokenizer, "special_tokens": special})


def _check_base(spec: TrainingSpec) -> None:
    """What extending a base rules out (the base's own fit is checked where it is read: tokenmill.jobs.submission)."""
    base = spec.base
    assert base is not None
    if (base.tokenizer is None) == (base.reference is None):
        _refuse("base", 'give either {"tokenizer": NAME, "version": N} or {"reference": "gpt2" | "cl100k" | "o200k"}')
    if base.reference is not None and base.version is not None:
        _refuse("base", "a reference has no versions: drop 'version'")
    fixed = {"algorithm": "bpe", "byte_fallback": False, "normalization": "none", "lowercase": False,
             "split_digits": False, "parity": False, "counting": "streamed", "sampling": None, "max_sentences": None}
    for name, value in fixed.items():
        if getattr(spec, name) != value:
            _refuse("base", f"an extension keeps its base's byte-level BPE as it is: '{name}' cannot be "
                            f"{getattr(spec, name)!r} (leave it out)")
    if spec.library not in ("tokenizers", "tokenmill") or spec.byte_level is False:
        _refuse("base", "an extension is byte-level BPE learned by tokenmill's rule: leave 'library' and 'byte_level' out")
    if spec.pre_tokenizer_regex or (spec.pre_tokenizer is not None and spec.pre_tokenizer != base.reference):
        _refuse("base", "an extension splits text with its base's regex: leave 'pre_tokenizer' and "
                        "'pre_tokenizer_regex' out")
    if spec.special_tokens:
        _refuse("base", "an extension keeps its base's special tokens where they are: leave 'special_tokens' out")


def _refuse(field: str, why: str) -> None:
    raise InvalidInput(f"spec.{field}: {why}", field=f"spec.{field}")


def _check_combination(spec: TrainingSpec) -> None:
    if spec.library == "sentencepiece":
        if spec.algorithm == "wordpiece":
            _refuse("library", "sentencepiece trains unigram or bpe, not wordpiece")
        if spec.byte_level:
            _refuse("byte_level", "sentencepiece has no byte-level mode; use byte_fallback")
        if spec.pre_tokenizer != "metaspace" or spec.pre_tokenizer_regex:
            _refuse("pre_tokenizer", "sentencepiece splits on whitespace itself: use 'metaspace' and no regex")
        if spec.normalization not in SENTENCEPIECE_NORMALIZATIONS:
            _refuse("normalization", f"sentencepiece supports {', '.join(SENTENCEPIECE_NORMALIZATIONS)}")
        if spec.lowercase and spec.normalization == "none":
            _refuse("lowercase", "sentencepiece folds case only together with nfkc: set normalization to 'nfkc'")
        if spec.max_token_length and spec.max_token_length > SENTENCEPIECE_MAX_PIECE:
            _refuse("max_token_length", f"sentencepiece allows pieces of at most {SENTENCEPIECE_MAX_PIECE} characters")
    if spec.library in ("rustbpe", "tokenmill"):
        _check_rustbpe_rule(spec)
    if spec.parity:
        _check_parity(spec)
    if spec.mixture is not None and spec.max_sentences:
        _refuse("mixture", "max_sentences samples the corpora as they are: leave it out to train on a mixture")
    if spec.sampling is not None and (why := sampling_refusal(spec.algorithm, spec.sampling, "sampling")):
        _refuse(*why)
    if spec.counting == "distributed":
        _check_distributed(spec)
    if spec.superword is not None:
        _check_superword(spec)
    if spec.byte_level and spec.byte_fallback:
        _refuse("byte_fallback", "a byte-level vocabulary already covers every byte; drop byte_fallback")
    if spec.byte_level and spec.algorithm != "bpe":
        _refuse("byte_level", "byte-level is offered for bpe only")
    if spec.byte_fallback and spec.algorithm == "wordpiece":
        _refuse("byte_fallback", "wordpiece has no byte fallback; it maps unknown words to [UNK]")
    if spec.pre_tokenizer_regex and spec.pre_tokenizer in ("whitespace", "metaspace"):
        _refuse("pre_tokenizer_regex", "a custom regex replaces the preset: set pre_tokenizer to 'none' or a regex preset")
    if spec.end_of_word_suffix and (spec.algorithm != "bpe" or spec.library != "tokenizers" or spec.byte_level
                                    or spec.pre_tokenizer != "whitespace"):
        _refuse("end_of_word_suffix", "applies to character-level bpe on tokenizers with the whitespace pre_tokenizer")


def _check_superword(spec: TrainingSpec) -> None:
    assert spec.superword is not None
    if spec.library != "tokenmill" or spec.algorithm != "bpe" or not spec.byte_level:
        _refuse("superword", "superword merges are learned by tokenmill's rule on byte-level bpe: set library 'tokenmill'")
    if spec.normalization != "none" or spec.lowercase or spec.split_digits:
        _refuse("superword", "superword versions are read by tiktoken too: no normalization, lowercase or split_digits")
    if not spec.superword.transition_vocab_size < spec.vocab_size:
        _refuse("superword", f"transition_vocab_size must be below vocab_size ({spec.vocab_size})")


def _check_parity(spec: TrainingSpec) -> None:
    if spec.library != "tokenizers" or spec.algorithm != "bpe" or not spec.byte_level:
        _refuse("parity", "parity-aware training is byte-level bpe on the tokenizers library")
    if spec.max_sentences:
        _refuse("max_sentences", "parity-aware training reads every line of each language (no sample)")
    if spec.mixture is not None or spec.deduplicate:
        _refuse("mixture" if spec.mixture is not None else "deduplicate",
                "parity-aware training reads each language's parallel lines as they are")


def _check_distributed(spec: TrainingSpec) -> None:
    if spec.library == "tokenizers":
        _refuse("counting", "tokenizers learns from texts only: distributed counting trains with library rustbpe "
                            "(byte-level bpe) or sentencepiece")
    if spec.max_sentences:
        _refuse("max_sentences", "distributed counting reads every line (no sample)")


def rustbpe_refusal(spec: TrainingSpec) -> str | None:
    """Why rustbpe (or tokenmill, which learns by its rule) cannot train this spec (the field
    first), or None when it can."""
    name = spec.library
    if spec.algorithm != "bpe" or not spec.byte_level:
        return f"algorithm: {name} trains byte-level BPE only"
    if not spec.regex_pattern:
        return f"pre_tokenizer: {name} splits with a regex: use gpt2, cl100k, o200k or a custom pre_tokenizer_regex"
    if spec.split_digits:
        return f"split_digits: {name} splits with one regex; put the digit rule into pre_tokenizer_regex"
    if spec.max_token_length:
        return f"max_token_length: {name} has no token length limit"
    if spec.vocab_size <= BYTE_ALPHABET + len(spec.special_tokens or []):
        return "vocab_size: must hold the special tokens, the 256 byte tokens and one merge"
    return None


def _check_rustbpe_rule(spec: TrainingSpec) -> None:
    # rustbpe, and tokenmill, which learns by its rule (a custom regex runs in Python's regex there).
    if (why := rustbpe_refusal(spec)) is not None:
        field, _, reason = why.partition(": ")
        _refuse(field, reason)


def check_regex(pattern: str, library: str, owner: str | None) -> None:
    """Compile and probe a custom regex, every step in a sandbox process on the owner's share
    (tokenmill.training.regex_check): none of it may hold this process."""
    from tokenmill.sandboxed import sandbox
    from tokenmill.sandboxed.regex_probe import probe_texts

    pool = sandbox.current()
    check = "tokenmill.training.regex_check"
    try:
        why = pool.call(f"{check}:compile_refusal", pattern, library, timeout=REGEX_COMPILE_SECONDS, owner=owner)
    except TimedOut:
        _refuse("pre_tokenizer_regex", f"takes more than {REGEX_COMPILE_SECONDS:g}s to compile (a large counted "
                                       "repetition such as (?:a{1000}){1000}?)")
    except OverMemory:
        _refuse("pre_tokenizer_regex", f"needs more than {pool.memory_bytes // 2**20} MiB to compile (a large counted "
                                       "repetition such as (?:a{1000}){1000}?)")
    except Failed as exc:
        _refuse("pre_tokenizer_regex", f"could not be compiled ({exc})")
    if why:
        _refuse("pre_tokenizer_regex", why)
    # Texts built from the pattern to trigger catastrophic backtracking. First with the engine that
    # trains and encodes (Oniguruma, through tokenizers' Split), which cannot be interrupted but by
    # ending its process; then with the `regex` module (tiktoken's engine backtracks too), which
    # honours a timeout. The time limit of every encode and job is the backstop for what this misses.
    probes = [*probe_texts(pattern, REGEX_PROBE_REPEAT), *REGEX_PROBES]
    slow = ("backtracks catastrophically (a repeated group inside a repetition?) on text made to trigger it: "
            f"a run of one of its characters {REGEX_PROBE_REPEAT} long, then one that ends the match")
    try:
        pool.split(pattern, probes, REGEX_PROBE_SECONDS, owner)
    except TimedOut:
        _refuse("pre_tokenizer_regex", f"{slow}: Oniguruma, the tokenizers engine, took over {REGEX_PROBE_SECONDS:g}s")
    except SandboxError as exc:  # over the memory limit, or Oniguruma gave up ("retry-limit-in-match")
        _refuse("pre_tokenizer_regex", f"{slow}: Oniguruma, the tokenizers engine, failed ({exc})")
    try:
        too_slow = pool.call(f"{check}:regex_probe_refusal", pattern, probes, REGEX_PROBE_SECONDS,
                             timeout=2 * REGEX_PROBE_SECONDS + 1, owner=owner)
    except SandboxError:
        too_slow = True
    if too_slow:
        _refuse("pre_tokenizer_regex", f"{slow}: the regex engine took over {REGEX_PROBE_SECONDS:g}s")


def _check_special_tokens(tokens: list[str]) -> None:
    # Count, then length, then content: a hostile list costs no more than the limits allow.
    if len(tokens) > MAX_SPECIAL_TOKENS:
        _refuse("special_tokens", f"holds {len(tokens)} tokens; at most {MAX_SPECIAL_TOKENS} are allowed")
    for index, token in enumerate(tokens):
        if len(token) > MAX_SPECIAL_TOKEN_CHARS:
            _refuse("special_tokens", f"token {index} is {len(token)} characters long; "
                    f"at most {MAX_SPECIAL_TOKEN_CHARS} are allowed")
        if flaw := unstorable(token, controls=True):
            _refuse("special_tokens", f"token {index} {flaw}")
    if len(set(tokens)) != len(tokens):
        _refuse("special_tokens", "holds a token twice")
    if any(not token or token.isspace() for token in tokens):
        _refuse("special_tokens", "holds an empty or blank token")


def _check_vocab_size(spec: TrainingSpec) -> None:
    alphabet = BYTE_ALPHABET if (spec.byte_level or spec.byte_fallback) else 0
    floor = alphabet + len(spec.special_tokens or []) + 1
    if spec.vocab_size < floor:
        what = "the 256 byte tokens plus " if alphabet else ""
        _refuse("vocab_size", f"must be at least {floor}: {what}the special tokens and one learned token")
