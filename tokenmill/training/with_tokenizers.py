"""Training with Hugging Face `tokenizers`: a spec and an iterable of texts in, a Tokenizer out.

Deliberately not here: reading corpora (the caller streams documents in), files (versions/export.py),
and sentencepiece (with_sentencepiece.py). Byte fallback needs care: the BPE and
Unigram trainers do not add the 256 `<0xNN>` tokens a byte-fallback model falls back to
(tokenizers issue #1407), so they are passed as extra initial tokens and then turned back
into ordinary vocabulary entries, so they decode to bytes and are not "special".

A custom regex runs in Oniguruma inside the trainer, where nothing can stop it: each document
is split first by Python's regex within `regex_seconds` (tokenmill.training.regex_limit says why
that engine), and Oniguruma giving up on a document by itself is named as such.
"""

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS, SlowRegex, checked, engine_gave_up, limit_of
from tokenmill.training.spec import TrainingSpec

BYTE_TOKENS = [f"<0x{value:02X}>" for value in range(256)]
METASPACE = "▁"
WORDPIECE_PREFIX = "##"


def determinism(spec: TrainingSpec) -> dict[str, bool | str]:
    """Whether the same spec, corpora and seed give byte-identical files, and why not if not.

    Measured across processes (tests/unit/test_determinism.py). `tokenizers` numbers the
    continuing-subword tokens ("##x", "x</w>") in hash-map order, which differs per process,
    and those ids break ties between equally frequent merges (tokenizers issue #1794); its
    Unigram trainer has the same kind of ordering. No setting fixes either in 0.23.3.
    """
    if spec.library == "sentencepiece":
        return {"deterministic": True, "note": "sentencepiece with a fixed thread count and a seeded sample"}
    if spec.library in ("rustbpe", "tokenmill"):
        return {"deterministic": True, "note": f"{spec.library}: the most frequent pair, a tie to the lower pair of ids; "
                                               "counts are sums, so the order of the texts does not matter"}
    if spec.algorithm == "bpe" and not spec.end_of_word_suffix:
        return {"deterministic": True, "note": "tokenizers BPE without subword prefix or suffix"}
    return {"deterministic": False,
            "note": "tokenizers assigns ids to continuing-subword tokens (and Unigram seeds) in hash-map order "
                    "that changes per process; ties between equally frequent candidates can resolve differently "
                    "(tokenizers issue #1794)"}


def unk_token(spec: TrainingSpec) -> str | None:
    """The unknown token the model maps unseen symbols to (byte-level models have none)."""
    if spec.byte_level:
        return None
    if spec.algorithm == "wordpiece":
        return "[UNK]"
    return "<unk>"


def trainer_tokens(spec: TrainingSpec) -> list[str]:
    """Tokens given ids before any learned one: specials, then unk, then byte tokens."""
    tokens = list(spec.special_tokens or [])
    unk = unk_token(spec)
    if unk and unk not in tokens:
        tokens.insert(0, unk)
    if spec.byte_fallback:
        tokens += [token for token in BYTE_TOKENS if token not in tokens]
    return tokens


def normalizer_of(spec: TrainingSpec) -> normalizers.Normalizer | None:
    """The normalizer the spec asks for (None for none): what training and encoding both apply first."""
    steps = []
    if spec.normalization != "none":
        steps.append(getattr(normalizers, spec.normalization.upper())())
    if spec.lowercase:
        steps.append(normalizers.Lowercase())
    if spec.pre_tokenizer == "metaspace":
        # sentencepiece's dummy prefix, always (Metaspace's own "always" skips texts that
        # already start with a space, and decoding would then lose one); spaces become "▁".
        steps += [normalizers.Prepend(METASPACE), normalizers.Replace(" ", METASPACE)]
    return normalizers.Sequence(steps) if steps else None


def _pre_tokenizer(spec: TrainingSpec) -> pre_tokenizers.PreTokenizer | None:
    steps: list[pre_tokenizers.PreTokenizer] = []
    pattern = spec.regex_pattern
    if spec.pre_tokenizer == "whitespace":
        steps.append(pre_tokenizers.Whitespace())
    elif spec.pre_tokenizer == "metaspace":
        steps.append(pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="never"))
    elif pattern:
        steps.append(pre_tokenizers.Split(Regex(pattern), behavior="isolated"))
    if spec.split_digits:
        steps.append(pre_tokenizers.Digits(individual_digits=True))
    if spec.byte_level:
        steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    if not steps:
        return None
    return steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)


def _decoder(spec: TrainingSpec) -> decoders.Decoder:
    if spec.byte_level:
        return decoders.ByteLevel()
    if spec.algorithm == "wordpiece":
        return decoders.WordPiece(prefix=WORDPIECE_PREFIX)
    if spec.end_of_word_suffix:
        return decoders.BPEDecoder(suffix=spec.end_of_word_suffix)
    if spec.pre_tokenizer == "metaspace":
        return metaspace_decoder(spec.byte_fallback)
    return decoders.Sequence([*([decoders.ByteFallback()] if spec.byte_fallback else []), decoders.Fuse()])


def metaspace_decoder(byte_fallback: bool) -> decoders.Decoder:
    """Llama's decoder: "▁" back to spaces, byte tokens back to bytes, one string, and the
    space put in front of the text (the dummy prefix) taken off again."""
    steps: list[decoders.Decoder] = [decoders.Replace(METASPACE, " ")]
    if byte_fallback:
        steps.append(decoders.ByteFallback())
    return decoders.Sequence([*steps, decoders.Fuse(), decoders.Strip(content=" ", left=1, right=0)])


def _model_and_trainer(spec: TrainingSpec, alphabet: list[str] | None) -> tuple[models.Model, trainers.Trainer]:
    tokens = trainer_tokens(spec)
    unk = unk_token(spec)
    if spec.algorithm == "bpe":
        suffix = {"end_of_word_suffix": spec.end_of_word_suffix} if spec.end_of_word_suffix else {}
        model: models.Model = models.BPE(unk_token=unk, byte_fallback=spec.byte_fallback, **suffix)
        initial = pre_tokenizers.ByteLevel.alphabet() if spec.byte_level else list(alphabet or [])
        # Options given only when set (the trainer takes no None for them); Any: an int and a str, as keywords.
        options: dict[str, Any] = ({"max_token_length": spec.max_token_length, **suffix} if spec.max_token_length
                                   else dict(suffix))
        if alphabet is not None:
            # Exactly the chosen alphabet: the trainer's own cut keeps equally frequent
            # characters in hash-map order, which differs from one process to the next.
            options["limit_alphabet"] = len(alphabet)
        trainer: trainers.Trainer = trainers.BpeTrainer(
            vocab_size=spec.vocab_size, min_frequency=spec.min_frequency, special_tokens=tokens,
            initial_alphabet=initial, show_progress=False, **options,
        )
    elif spec.algorithm == "wordpiece":
        model = models.WordPiece(unk_token=unk, continuing_subword_prefix=WORDPIECE_PREFIX)
        trainer = trainers.WordPieceTrainer(
            vocab_size=spec.vocab_size, min_frequency=spec.min_frequency, special_tokens=tokens,
            continuing_subword_prefix=WORDPIECE_PREFIX, show_progress=False,
        )
    else:
        model = models.Unigram()
        trainer = trainers.UnigramTrainer(
            vocab_size=spec.vocab_size, special_tokens=tokens, unk_token=unk,
            max_piece_length=spec.max_token_length or 16, show_progress=False,
        )
    return model, trainer


def pipeline_and_trainer(spec: TrainingSpec, alphabet: list[str] | None = None) -> tuple[Tokenizer, trainers.Trainer]:
    """An untrained tokenizer pipeline and the trainer for it."""
    model, trainer = _model_and_trainer(spec, alphabet)
    tokenizer = Tokenizer(model)
    if (normalizer := normalizer_of(spec)) is not None:
        tokenizer.normalizer = normalizer
    if (pre_tokenizer := _pre_tokenizer(spec)) is not None:
        tokenizer.pre_tokenizer = pre_tokenizer
    tokenizer.decoder = _decoder(spec)
    return tokenizer, trainer


def needs_alphabet(spec: TrainingSpec) -> bool:
    """Whether training first chooses an alphabet (character-level BPE with byte fallback)."""
    return spec.library == "tokenizers" and spec.algorithm == "bpe" and spec.byte_fallback and not spec.byte_level


def coverage_alphabet(spec: TrainingSpec, texts: Iterable[str]) -> list[str]:
    """The most frequent characters covering `character_coverage` of the (normalized) text.

    At most half the room left by the special and byte tokens goes to the alphabet, so
    merges keep the other half; rarer characters fall back to bytes. Ties are broken by
    code point, so the choice is the same in every process.
    """
    normalizer = normalizer_of(spec)
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(normalizer.normalize_str(text) if normalizer else text)
    budget = max((spec.vocab_size - len(trainer_tokens(spec))) // 2, 1)
    kept: list[str] = []
    total, covered = sum(counts.values()), 0
    for char, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if len(kept) >= budget or (total and covered / total >= spec.character_coverage):
            break
        kept.append(char)
        covered += count
    return kept


def train(spec: TrainingSpec, texts: Iterable[str], alphabet: list[str] | None = None,
          regex_seconds: float | None = REGEX_DOCUMENT_SECONDS) -> Tokenizer:
    """Train a `tokenizers` tokenizer on the texts, as the spec says.

    Callers that stream their texts choose the alphabet in a pass of their own and give it;
    otherwise the texts are held in memory for the two passes. SlowRegex when a custom regex
    takes longer than `regex_seconds` on one document (see the module docstring).
    """
    if needs_alphabet(spec) and alphabet is None:
        texts = list(texts)
        alphabet = coverage_alphabet(spec, texts)
    tokenizer, trainer = pipeline_and_trainer(spec, alphabet)
    _oniguruma(spec, lambda: tokenizer.train_from_iterator(_checked(spec, texts, regex_seconds), trainer=trainer))
    if spec.byte_fallback:
        tokenizer = _unspecial_byte_tokens(tokenizer)
    return tokenizer


def train_parity(spec: TrainingSpec, languages: Sequence[Iterable[str]], dev: Sequence[Iterable[str]],
                 regex_seconds: float | None = REGEX_DOCUMENT_SECONDS) -> Tokenizer:
    """Parity-aware byte-level BPE: one training and one parallel dev iterator per language.

    Each merge goes to the language whose dev text compresses worst so far (tokenizers'
    ParityBpeTrainer, "base" variant); the vocabulary is laid out as plain BPE's: the special
    tokens, the 256 bytes, then the merges.
    """
    tokenizer, _ = pipeline_and_trainer(spec)
    tokens = trainer_tokens(spec)
    trainer = trainers.ParityBpeTrainer(
        num_merges=spec.vocab_size - len(tokens) - len(pre_tokenizers.ByteLevel.alphabet()),
        min_frequency=spec.min_frequency, special_tokens=tokens, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    try:
        _oniguruma(spec, lambda: trainer.train_from_iterator(
            tokenizer, train_iterators=[iter(_checked(spec, texts, regex_seconds)) for texts in languages],
            dev_iterators=[iter(_checked(spec, texts, regex_seconds)) for texts in dev]))
    except SlowRegex as exc:  # numbered within one language's texts: not a number a person can find
        raise exc.at("one of the parallel documents") from None
    return tokenizer


Result = TypeVar("Result")


def _checked(spec: TrainingSpec, texts: Iterable[str], regex_seconds: float | None) -> Iterable[str]:
    """The texts, each first split by Python's regex within the limit when the spec has a custom regex."""
    seconds = limit_of(spec.pre_tokenizer_regex, regex_seconds)
    if spec.pre_tokenizer_regex is None or seconds is None:
        return texts
    return checked(texts, spec.pre_tokenizer_regex, normalizer_of(spec), seconds)


def _oniguruma(spec: TrainingSpec, training: Callable[[], Result]) -> Result:
    """What training returns; Oniguruma giving up on a document of a custom regex (its retry
    limit in one match attempt, a Rust panic) as a SlowRegex."""
    try:
        return training()
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        if not (spec.pre_tokenizer_regex and type(exc).__name__ == "PanicException" and "retry-limit" in str(exc)):
            raise
        raise SlowRegex(spec.pre_tokenizer_regex, engine_gave_up(
            "the tokenizers regex engine (Oniguruma)", "over its retry limit in one match attempt")) from None


def _unspecial_byte_tokens(tokenizer: Tokenizer) -> Tokenizer:
    # The byte tokens went in as trainer "special tokens" to get fixed ids; make them plain
    # vocabulary again so the model falls back to them and decoding keeps their bytes.
    data = json.loads(tokenizer.to_str())
    byte_tokens = set(BYTE_TOKENS)
    data["added_tokens"] = [item for item in data["added_tokens"] if item["content"] not in byte_tokens]
    data["model"]["byte_fallback"] = True
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))
