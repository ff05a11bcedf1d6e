"""Byte-level BPE trained with `rustbpe`: a spec and an iterable of texts in, a `tokenizers` Tokenizer out.

rustbpe 0.1.0 (PyPI, MIT; source: karpathy/rustbpe `src/lib.rs`) pulls texts from a Python
iterator 8,192 at a time and, with the GIL released, splits them with the pattern
(fancy_regex, tiktoken's engine) and counts the pieces on every core (rayon; RAYON_NUM_THREADS
caps it): only distinct pieces and their counts are kept, never the texts. Then, holding
the GIL on one thread, it counts pairs and merges, always the most frequent pair, a tie
going to the smaller pair of ids (raw byte values for single bytes): the same texts give the
same merges in every process, in any order. It returns tiktoken ranks (token bytes → id:
the 256 single bytes, then one token per merge).

The Tokenizer is what `tokenmill.training.with_tokenizers.train` builds for byte-level BPE, around those
merges: the spec's normalizer, Split + ByteLevel pre-tokenizer and ByteLevel decoder; the
special tokens at ids 0..k-1, the 256 byte tokens next in `tokenizers`' order (by code point
of GPT-2's byte-to-unicode characters), then the merges in rustbpe's order. The texts are
normalized with that same normalizer, so training and encoding agree. rustbpe does not give
its merge pairs, only each token's bytes; the pair is found again by applying the earlier
merges to those bytes, which leaves exactly the two parts it was merged from (no merge
crosses the edge of a token made later).

Deliberately not handled, refused with a ValueError naming the field: anything but
byte-level BPE split by a regex (preset or custom), split_digits and max_token_length
(rustbpe has one regex and no length limit). Not honoured, not refused: `min_frequency`
(rustbpe merges down to pairs seen once, which changes nothing when the last merge is still
seen min_frequency times: any corpus of a few MB at 32k) and `seed` (nothing is random).
Ties can go another way than in `tokenizers`, which numbers the single bytes by GPT-2
character, so the merges can differ where counts tie. Counts are 32-bit: a piece or pair
seen over 2**31 times (tens of GB) overflows. A document the regex engine gives up on
(rustbpe panics; a million spaces in a row with gpt2) is an InvalidCorpus; with a custom regex,
fancy_regex giving up after 1,000,000 backtracking steps in one match attempt, or a batch of
documents taking longer than the regex's limit allows, is a SlowRegex that says which documents
(tokenmill.training.regex_limit: rustbpe splits `regex_limit.BATCH` documents at a time).

rustbpe holds the GIL while it merges (tens of seconds on 100 MB), which would stop the job's
heartbeat and memory guard: so `train_rustbpe` learns in a child process of its own (a fresh
interpreter, fed the texts through a pipe a batch at a time), while this process only waits on the pipe.
"""

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator

import rustbpe
from tokenizers import Tokenizer, models

from tokenmill.errors import InvalidCorpus
from tokenmill.formats.tiktoken_format import BYTE_ENCODER, byte_level_token
from tokenmill.training import with_tokenizers
from tokenmill.training.regex_limit import (
    BATCH,
    REGEX_DOCUMENT_SECONDS,
    SLOW_EXIT,
    Batches,
    SlowRegex,
    engine_gave_up,
    limit_of,
    report_and_exit,
    reported,
    took_over,
)
from tokenmill.training.spec import BYTE_ALPHABET, TrainingSpec, rustbpe_refusal
from tokenmill.training.text_frames import batches, frames, read_texts, write_frame, write_texts

# GPT-2's printable character for each byte value (tokenizers' ByteLevel alphabet).
# The order tokenizers' BpeTrainer gives the byte tokens their ids: by code point.
BYTE_ORDER = sorted(range(BYTE_ALPHABET), key=lambda byte: ord(BYTE_ENCODER[byte]))
ENGINE = "rustbpe's regex engine (fancy_regex)"


def check_pattern(pattern: str) -> None:
    """Raise ValueError when rustbpe's regex engine (fancy_regex) does not compile the pattern."""
    rustbpe.Tokenizer().train_from_iterator(iter(()), BYTE_ALPHABET, pattern=pattern)


def learn_ranks(spec: TrainingSpec, texts: Iterable[str]) -> list[bytes]:
    """Every token's bytes in rank order: the 256 single bytes, then one per merge learned.
    rustbpe takes the texts `BATCH` at a time (what `regex_limit.Batches` watches)."""
    if (why := rustbpe_refusal(spec)) is not None:
        raise ValueError(f"spec.{why}")
    normalizer = with_tokenizers.normalizer_of(spec)
    stream: Iterator[str] = iter(texts)
    if normalizer is not None:
        stream = map(normalizer.normalize_str, stream)
    learner = rustbpe.Tokenizer()
    learned = spec.vocab_size - len(spec.special_tokens or [])  # the special tokens take ids too, as in tokenizers
    try:
        learner.train_from_iterator(stream, learned, buffer_size=BATCH, pattern=spec.regex_pattern)
    except BaseException as exc:  # pyo3's PanicException is a BaseException
        if type(exc).__name__ != "PanicException" or "regex match failed" not in str(exc):
            raise
        if spec.pre_tokenizer_regex and "BacktrackLimitExceeded" in str(exc):
            raise SlowRegex(spec.pre_tokenizer_regex,
                            engine_gave_up(ENGINE, "over 1,000,000 backtracking steps in one match attempt")) from None
        raise InvalidCorpus(f"rustbpe's regex engine gave up on a document ({exc}), as on a run of a million spaces: "
                            "split such documents, or train with library tokenizers") from None
    ranks = sorted(learner.get_mergeable_ranks(), key=lambda item: item[1])
    return [bytes(token) for token, _ in ranks]


def merge_pairs(tokens: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The pair of earlier tokens each merged token (after the 256 bytes) was made from."""
    merged: dict[tuple[bytes, bytes], int] = {}
    known = set(tokens[:BYTE_ALPHABET])
    pairs = []
    lengths = {1}  # of the tokens known: a cut can only be after one of them (a long token has few)
    for rank, token in enumerate(tokens[BYTE_ALPHABET:], start=BYTE_ALPHABET):
        # Usually a single cut leaves two earlier tokens: that cut is the merge.
        cuts = [i for i in lengths if i < len(token) and token[:i] in known and token[i:] in known]
        known.add(token)
        lengths.add(len(token))
        # Otherwise apply the earlier merges to its bytes, lowest rank first, leftmost first.
        parts = [token[:cuts[0]], token[cuts[0]:]] if len(cuts) == 1 else [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 2:
            ranked = [merged.get((parts[i], parts[i + 1]), rank) for i in range(len(parts) - 1)]
            best = min(range(len(ranked)), key=ranked.__getitem__)
            if ranked[best] == rank:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) != 2 or (parts[0], parts[1]) in merged:
            raise ValueError(f"rank {rank} ({token!r}) is not one merge of two earlier tokens")
        merged[(parts[0], parts[1])] = rank
        pairs.append((parts[0], parts[1]))
    return pairs



def to_tokenizer(spec: TrainingSpec, pairs: list[tuple[bytes, bytes]]) -> Tokenizer:
    """The tokenizers pipeline the spec builds, its BPE model made of these merges (each the
    bytes of its two tokens, in rank order after the 256 single bytes)."""
    specials = list(spec.special_tokens or [])
    vocab = {token: index for index, token in enumerate(specials)}
    for byte in BYTE_ORDER:
        vocab[BYTE_ENCODER[byte]] = len(vocab)
    merges = [(byte_level_token(left), byte_level_token(right)) for left, right in pairs]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    if len(vocab) != len(specials) + BYTE_ALPHABET + len(pairs):
        # A special token spelled like a learned token would share its id (tokenizers' trainer does that too).
        clash = [token for token in specials if vocab[token] >= len(specials)]
        raise ValueError(f"special token {clash[0]!r} is also a learned token; tiktoken and tokenizers would disagree"
                         if clash else "two merges make the same token")
    tokenizer = with_tokenizers.pipeline_and_trainer(spec)[0]
    tokenizer.model = models.BPE(vocab=vocab, merges=merges)
    tokenizer.add_special_tokens(specials)
    return tokenizer


def train_rustbpe(spec: TrainingSpec, texts: Iterable[str], regex_seconds: float | None = REGEX_DOCUMENT_SECONDS) -> Tokenizer:
    """Train byte-level BPE on the texts with rustbpe, as the spec says (see the module docstring);
    a custom regex is watched as `regex_limit.Batches` says, with `regex_seconds` per document."""
    if (why := rustbpe_refusal(spec)) is not None:
        raise ValueError(f"spec.{why}")
    return to_tokenizer(spec, merge_pairs(learn_ranks_apart(spec, texts, regex_seconds)))


CHILD = "from tokenmill.training.with_rustbpe import serve; serve()"
REFUSED = 3  # the child's exit code for an InvalidCorpus (its message on stderr)


def learn_ranks_apart(spec: TrainingSpec, texts: Iterable[str],
                      regex_seconds: float | None = REGEX_DOCUMENT_SECONDS) -> list[bytes]:
    """`learn_ranks` in a child process: the spec and the regex's limit, then the texts, go down
    its stdin, the ranks come back on its stdout. The child is killed if this process stops
    waiting (a time limit, a cancel)."""
    errors = tempfile.TemporaryFile()  # a file, not a pipe: a chatty child can never block on it
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=errors)
    try:
        assert child.stdin is not None and child.stdout is not None  # both are pipes
        try:
            write_frame(child.stdin, spec.model_dump_json().encode())
            write_frame(child.stdin, json.dumps(limit_of(spec.pre_tokenizer_regex, regex_seconds)).encode())
            for batch in batches(texts):
                write_texts(child.stdin, batch)
            child.stdin.close()
        except BrokenPipeError:
            pass  # the child ended early: its exit code and stderr say why
        tokens = list(frames(child.stdout))
        if child.wait() == 0:
            return tokens
        errors.seek(0)
        said = errors.read().decode("utf-8", "replace").strip()
        if child.returncode == REFUSED:
            raise InvalidCorpus(said.splitlines()[-1])
        if child.returncode == SLOW_EXIT and spec.pre_tokenizer_regex:
            raise reported(spec.pre_tokenizer_regex, said)
        raise RuntimeError(f"the rustbpe training process failed (exit {child.returncode}): {said[-2000:]}")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        errors.close()


def serve() -> None:
    """The child's side of `learn_ranks_apart`. A custom regex too slow on a batch, or that the
    regex engine gives up on, ends it with `regex_limit.report_and_exit`."""
    stream = sys.stdin.buffer
    found = frames(stream)
    spec = TrainingSpec.model_validate_json(next(found))
    seconds: float | None = json.loads(next(found))
    texts: Iterable[str] = read_texts(stream)
    watched = None
    if seconds is not None:
        limit = seconds
        texts = watched = Batches(texts, limit, lambda first, last: report_and_exit(took_over(limit, ENGINE), first, last))
    try:
        tokens = learn_ranks(spec, texts)
    except InvalidCorpus as exc:
        print(exc.detail, file=sys.stderr)
        sys.exit(REFUSED)
    except SlowRegex as exc:  # the engine gave up: on the batch in flight
        batch = watched.stop() if watched is not None else None
        report_and_exit(exc.what, *(batch or (None, None)))
    out = sys.stdout.buffer
    for token in tokens:
        write_frame(out, token)
    out.flush()
