"""Training with sentencepiece: a spec and an iterable of texts in, tokenizer.model, tokenizer.vocab
and an equivalent tokenizer.json out, all as bytes (nothing touches the filesystem).

What survives encode → decode:
- normalization "none" is sentencepiece's "identity" rule with remove_extra_whitespaces off:
  with byte_fallback every text comes back as it was (leading, trailing and repeated spaces,
  tabs, newlines, "\r", NUL, emoji, combining marks), except the character "▁" (U+2581),
  which is sentencepiece's space and comes back as " ". Without byte_fallback a character
  outside the vocabulary becomes <unk>: " ⁇ " in sentencepiece, "<unk>" in `tokenizers`.
- "nfkc" is the plain Unicode "nfkc" rule ("nfkc_cf" with lowercase), not "nmt_nfkc", which also
  turns tabs, newlines and zero-width spaces into spaces and drops control characters; texts
  come back NFKC-normalized. "none" with lowercase is refused: no rule folds case without NFKC.
- The dummy prefix stays on (a "▁" in front of the text, as the metaspace pre_tokenizer does);
  decoding takes it off again.

tokenizer.json is built from the model's pieces with `tokenizers` (not transformers' converters:
they read a file, collapse repeated spaces, and let byte and special pieces into BPE merges).
It encodes to sentencepiece's ids, byte fallback included, except for two things that differ
by design and cannot be expressed in tokenizer.json:
- the text of a control token ("<unk>", "<s>", "</s>", "<pad>") in the input is that token for
  `tokenizers` (an added special token) and plain characters for sentencepiece;
- a text that starts with a special token: sentencepiece puts a lone "▁" piece in front of it,
  `tokenizers` does not (the rest is the same).
Special tokens are matched after normalization in `tokenizers` and before it in sentencepiece,
so a special token with a space or a character NFKC changes is not matched alike. Decoding is
the same for ids without special tokens or <unk>, as long as they do not cut a character's
byte pieces (sentencepiece then keeps the whole characters of the run, `tokenizers` writes
U+FFFD for every byte of it); sentencepiece drops control tokens, and `tokenizers` with
skip_special_tokens drops user-defined ones as well.

Deliberately not here: reading corpora, files and the manifest (versions/export.py), the checks that
belong at submission (spec.py), and min_frequency, which sentencepiece has no option for.
"""

import io
import math
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sentencepiece
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

from tokenmill.formats import sentencepiece_model
from tokenmill.formats.sentencepiece_model import CONTROL, NORMAL, UNIGRAM, UNKNOWN, USER_DEFINED, ModelProto
from tokenmill.training.spec import TrainingSpec
from tokenmill.training.with_tokenizers import METASPACE, metaspace_decoder

Progress = Callable[[float], None]
ROLE_TOKENS = {"<unk>": "unk", "<s>": "bos", "</s>": "eos", "<pad>": "pad"}
# The model depends on the thread count (unigram and bpe alike): it is fixed, not a setting.
NUM_THREADS = 2
# sentencepiece silently skips sentences longer than this (default 4192 bytes); documents
# are sentences here, so allow long ones.
MAX_SENTENCE_BYTES = 1 << 20


@dataclass
class SentencePieceResult:
    model: bytes  # the serialized ModelProto: tokenizer.model
    vocab: bytes  # tokenizer.vocab: piece<TAB>score per line, as spm_train writes it
    tokenizer_json: str  # the same model for `tokenizers`: same ids, byte fallback, decoding
    vocab_size: int

    def tokenizer_and_files(self) -> tuple[Tokenizer, dict[str, bytes]]:
        """The model as a `tokenizers` Tokenizer, and the files only sentencepiece writes."""
        return Tokenizer.from_str(self.tokenizer_json), {"tokenizer.model": self.model, "tokenizer.vocab": self.vocab}


def special_tokens(spec: TrainingSpec) -> list[str]:
    """The special tokens in id order: the spec's list, with <unk> first if it left it out."""
    tokens = list(spec.special_tokens or [])
    return tokens if "<unk>" in tokens else ["<unk>", *tokens]


def normalization_rule(spec: TrainingSpec) -> str:
    """The sentencepiece normalization rule for the spec's normalization and lowercase (which
    `resolve_spec` allows only with nfkc)."""
    if spec.normalization == "nfkc":
        return "nfkc_cf" if spec.lowercase else "nfkc"
    return "identity"


def trainer_options(spec: TrainingSpec) -> dict[str, Any]:
    """The keyword options for SentencePieceTrainer.train, without the input and the output
    (of a spec `resolve_spec` accepted: its limits are checked there)."""
    tokens = special_tokens(spec)
    # The roles sentencepiece knows get the ids of their place in the list (-1: absent); the
    # other tokens are user-defined symbols, which take the free ids in list order.
    ids = {f"{role}_id": tokens.index(token) if token in tokens else -1 for token, role in ROLE_TOKENS.items()}
    return {
        "model_type": spec.algorithm,
        "vocab_size": spec.vocab_size,
        "character_coverage": spec.character_coverage,
        "byte_fallback": spec.byte_fallback,
        "split_digits": spec.split_digits,
        "max_sentencepiece_length": spec.max_token_length or 16,
        "normalization_rule_name": normalization_rule(spec),
        "remove_extra_whitespaces": False,
        "user_defined_symbols": [token for token in tokens if token not in ROLE_TOKENS],
        **ids,
        # max_sentences is sampled before training (tokenmill.training.sampling): no sampling here.
        "input_sentence_size": 0,
        "max_sentence_length": MAX_SENTENCE_BYTES,
        # A corpus too small for vocab_size gives a smaller vocabulary, as `tokenizers` does,
        # instead of failing the job.
        "hard_vocab_limit": False,
        "num_threads": NUM_THREADS,
    }


def train_sentencepiece(spec: TrainingSpec, texts: Iterable[str], progress: Progress | None = None,
                        counted: bool = False) -> SentencePieceResult:
    """Train a sentencepiece model on the texts, as the spec says, and convert it for `tokenizers`.
    `counted`: the texts are "word<TAB>count" lines (sentencepiece's input_format tsv)."""
    options = trainer_options(spec)
    if counted:
        options["input_format"] = "tsv"
    # The caller samples max_sentences (tokenmill.training.sampling): sentencepiece's own sampling
    # differs from one process to the next whatever the seed (0.2.3).
    sentencepiece.set_random_generator_seed(spec.seed)  # for whatever else the trainer draws
    if progress:
        progress(0.0)
    log = _LogProgress(progress, spec.vocab_size)
    model = _train(options, texts, log)
    if log.failure is not None:
        raise log.failure
    if progress:
        progress(1.0)
    proto = sentencepiece_model.parse(model)
    return SentencePieceResult(model=model, vocab=vocab_file(proto), tokenizer_json=tokenizer_json(proto),
                               vocab_size=len(proto.pieces))


def _train(options: dict[str, Any], texts: Iterable[str], log: "_LogProgress") -> bytes:
    feed = _Texts(texts)
    writer = io.BytesIO()
    try:
        with _training_log(log.line):
            sentencepiece.SentencePieceTrainer.train(sentence_iterator=feed, model_writer=writer, **options)
    except RuntimeError as exc:
        # sentencepiece turns an exception from the texts into RuntimeError("INTERNAL: ..."):
        # give the caller back its own (a cancelled job, a corrupt corpus, a time limit).
        if feed.failure is not None:
            raise feed.failure from exc
        raise
    return writer.getvalue()


class _Texts:
    """The texts as sentencepiece reads them, keeping the exception they raise, if any."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = iter(texts)
        self.failure: BaseException | None = None

    def __iter__(self) -> "_Texts":
        return self

    def __next__(self) -> str:
        try:
            return next(self.texts)
        except StopIteration:
            raise
        except BaseException as exc:  # raised on the training thread afterwards
            self.failure = exc
            raise


def vocab_file(proto: ModelProto) -> bytes:
    """tokenizer.vocab: what spm_train writes beside the model (C++ stream formatting: %g)."""
    return "".join(f"{piece.piece}\t{piece.score:g}\n" for piece in proto.pieces).encode()


# --- conversion to tokenizers -------------------------------------------------------------


def tokenizer_json(proto: ModelProto) -> str:
    """The model as a `tokenizers` tokenizer.json: same pieces, ids, byte fallback and decoding."""
    tokenizer = Tokenizer(_model(proto))
    specials = [piece.piece for piece in proto.pieces if piece.type in (UNKNOWN, CONTROL, USER_DEFINED)]
    tokenizer.normalizer = _normalizer(proto, specials)
    tokenizer.pre_tokenizer = _pre_tokenizer(proto)
    tokenizer.decoder = metaspace_decoder(byte_fallback=True)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=True) for token in specials])
    return tokenizer.to_str(pretty=True)


def _normalizer(proto: ModelProto, specials: list[str]) -> normalizers.Normalizer:
    # sentencepiece normalizes, puts one "▁" before the whole text (even before a space or a
    # special token) and turns spaces into "▁". `tokenizers` normalizes the text between special
    # tokens piece by piece, unless the special tokens are matched after normalization
    # (normalized=True): then the whole text is normalized at once, and so is each special
    # token's own text, which must come out unchanged, hence the "▁" taken off again in front
    # of one. The cost: a text that starts with a special token lacks sentencepiece's lone "▁".
    steps: list[normalizers.Normalizer] = [normalizers.Prepend(METASPACE)]
    if specials:
        alternatives = "|".join(re.escape(token) for token in specials)
        steps.append(normalizers.Replace(Regex(rf"\A{METASPACE}(?={alternatives})"), ""))
    steps.append(normalizers.Replace(" ", METASPACE))
    if proto.normalizer_spec.precompiled_charsmap:
        steps.insert(0, normalizers.Precompiled(proto.normalizer_spec.precompiled_charsmap))
    return normalizers.Sequence(steps)


def _pre_tokenizer(proto: ModelProto) -> pre_tokenizers.PreTokenizer:
    # No piece has "▁" after its first character, so splitting into words changes no result
    # and lets `tokenizers` cache words.
    words = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="never", split=True)
    if proto.trainer_spec.model_type != UNIGRAM or not proto.trainer_spec.byte_fallback:
        return words
    # sentencepiece never matches a byte piece against the text; a `tokenizers` unigram would
    # take a literal "<0x41>" in the input for that piece (even over characters it knows not,
    # as <unk> scores lower). Cutting before the "<" of such a text keeps the piece out of reach.
    literal_byte = pre_tokenizers.Split(Regex(r"<(?=0x[0-9A-F]{2}>)"), behavior="isolated")
    return pre_tokenizers.Sequence([literal_byte, words])


def _model(proto: ModelProto) -> models.Model:
    spec = proto.trainer_spec
    if spec.model_type == UNIGRAM:
        scores = [(piece.piece, piece.score) for piece in proto.pieces]
        return models.Unigram(scores, unk_id=spec.unk_id, byte_fallback=spec.byte_fallback)
    vocab = {piece.piece: index for index, piece in enumerate(proto.pieces)}
    return models.BPE(vocab, bpe_merges(proto), unk_token=spec.unk_piece, fuse_unk=True,
                      byte_fallback=spec.byte_fallback)


def bpe_merges(proto: ModelProto) -> list[tuple[str, str]]:
    """Merges that rebuild a sentencepiece BPE model: each piece from any two pieces that make it.

    sentencepiece merges the adjacent pair whose concatenation scores highest, so a piece's
    merges rank by its score. Only normal pieces take part: byte, control and user-defined
    pieces are never merged into anything by sentencepiece.
    """
    normal = {piece.piece: piece.score for piece in proto.pieces if piece.type == NORMAL}
    merges = []
    for piece, score in normal.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in normal and right in normal:
                merges.append((-score, piece, left, right))
    merges.sort(key=lambda merge: merge[:2])
    return [(left, right) for _, _, left, right in merges]


# --- progress from sentencepiece's log ------------------------------------------------------

# The log lines of sentencepiece 0.2.3 (absl format: "I0000 00:00:1796006428.427023 13334
# trainer_interface.cc:601] Alphabet size=2077"); another version may word them otherwise,
# and then progress only moves at the start and the end.
_LOG_RECORD = re.compile(r"^([IWEF])\d{4} ")
_ABSL_BANNER = "WARNING: All log messages before absl::InitializeLog()"
# The spec printed at the start, one unprefixed line a field: "trainer_spec {", "  vocab_size: 4000", "}".
_SPEC_DUMP = re.compile(r"^(?:\w+ \{\}?|\}|  \w+: .*)$")
_META_PIECE = re.compile(r"\] Adding meta_piece: ")
_ALPHABET = re.compile(r"\] Alphabet size=(\d+)")
_EM_ROUND = re.compile(r"\] EM sub_iter=\d+ size=(\d+)")
_BPE_MERGED = re.compile(r"\] Merged: .* merges=(\d+)")


class _LogProgress:
    """Progress fractions read from sentencepiece's log lines.

    The lines arrive on the log reader's thread while the C++ trainer runs, which nothing can
    stop: an exception from the callback (a cancelled job) is kept in `failure` and raised once
    training returns, and the callback is not called again.
    """

    def __init__(self, progress: Progress | None, vocab_size: int) -> None:
        self.progress = progress
        self.vocab_size = vocab_size
        self.failure: BaseException | None = None
        self.meta_pieces = 0
        self.alphabet = 0
        self.first_size = 0

    def line(self, line: str) -> None:
        if _META_PIECE.search(line):
            self.meta_pieces += 1
        elif match := _ALPHABET.search(line):
            self.alphabet = int(match.group(1))
        elif match := _EM_ROUND.search(line):
            # Unigram shrinks its pieces by a constant factor a round, from the first round's
            # size to 1.1 × vocab_size, then finishes: how far along, on a log scale.
            size = int(match.group(1))
            self.first_size = self.first_size or size
            target = 1.1 * self.vocab_size
            if self.first_size > target:
                self._report(0.95 * math.log(self.first_size / size) / math.log(self.first_size / target))
        elif match := _BPE_MERGED.search(line):
            # BPE fills what the meta pieces and the alphabet leave of the vocabulary with merges.
            merges = self.vocab_size - self.meta_pieces - self.alphabet
            if merges > 0:
                self._report(int(match.group(1)) / merges)

    def _report(self, fraction: float) -> None:
        if self.progress is None or self.failure is not None:
            return
        try:
            self.progress(min(max(fraction, 0.0), 1.0))
        except BaseException as exc:
            self.failure = exc


_STDERR_LOCK = threading.Lock()


@contextmanager
def _training_log(on_line: Callable[[str], None]) -> Iterator[None]:
    """While the block runs, sentencepiece's log (fd 2) goes to on_line instead of stderr.

    Its INFO records (hundreds a run) are handed over and dropped; anything else written to
    fd 2 meanwhile (its warnings and errors, other threads' output) is passed on to stderr.
    fd 2 belongs to the whole process: a training started while another one holds it, or in
    a process without fd 2, runs without a progress log.
    """
    if not _STDERR_LOCK.acquire(blocking=False):
        yield
        return
    try:
        with _stderr_to(on_line):
            yield
    finally:
        _STDERR_LOCK.release()


@contextmanager
def _stderr_to(on_line: Callable[[str], None]) -> Iterator[None]:
    _flush_sys_stderr()
    try:
        saved = os.dup(2)
    except OSError:  # fd 2 is closed
        yield
        return
    read_end, write_end = os.pipe()
    reader = threading.Thread(target=_pump, args=(read_end, saved, on_line), daemon=True, name="sentencepiece-log")
    try:
        reader.start()
        os.dup2(write_end, 2)
        yield
    finally:
        _flush_sys_stderr()
        os.dup2(saved, 2)
        os.close(write_end)  # with fd 2 back, the pipe's last write end: the reader sees EOF
        if reader.ident is None:  # it never started
            os.close(read_end)
        else:
            reader.join(timeout=10)
        if not reader.is_alive():  # else a forked child still holds the pipe, and the reader writes to `saved`
            os.close(saved)


def _flush_sys_stderr() -> None:
    # Python's own buffered stderr output belongs to whichever fd 2 it was written under.
    if sys.stderr is not None:
        sys.stderr.flush()


def _pump(read_end: int, forward_to: int, on_line: Callable[[str], None]) -> None:
    # Read to the end whatever happens: a reader that stops leaves the trainer blocked on a full pipe.
    with os.fdopen(read_end, "rb") as pipe:
        for raw in pipe:
            line = raw.decode("utf-8", "replace")
            try:
                if ((record := _LOG_RECORD.match(line)) and record.group(1) == "I") or _SPEC_DUMP.match(line):
                    on_line(line)
                elif not line.startswith(_ABSL_BANNER):
                    os.write(forward_to, raw)
            except Exception:  # progress is best effort; the log must keep flowing
                pass
