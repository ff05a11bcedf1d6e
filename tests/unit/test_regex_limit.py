"""A custom regex's time on one document, bounded while training (tokenmill.training.regex_limit):
a regex the submission probe lets through but that backtracks for minutes on one document fails
the training within a few seconds, naming the regex and the document, on every library; an
ordinary custom regex trains to the same files as without the bound."""

import threading
import time

import psutil
import pytest

from tokenmill.errors import SlowDocument
from tokenmill.models import Corpus
from tokenmill.store import LocalStore
from tokenmill.training import with_tokenizers
from tokenmill.training.counting import spills
from tokenmill.training.patterns import PATTERNS
from tokenmill.training.regex_limit import Batches, SlowRegex
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import train_version_files
from tokenmill.training.with_rustbpe import train_rustbpe
from tokenmill.training.with_tokenmill import train_tokenmill

# Two runs of letter-digit pairs in a row, then a lookahead (which makes fancy_regex backtrack
# rather than hand the pattern to a linear engine): the probe's texts repeat one character or one
# literal run, so none of them alternates letters and digits, and it passes. On "a1a1…x!" each
# start tries every cut between the two runs, and each cut fails at the end: cubic in the run.
SLOW_REGEX = r"(?:[a-z][0-9])+(?:[a-z][0-9])+(?=!)|[a-z]+|[0-9]+|\s+|."
# 200 runs of 1,000 pairs: ~160 s in Oniguruma (0.8 s a run), ~800 s in fancy_regex, hours in regex.
SLOW_DOCUMENT = ("a1" * 1000 + "x! ") * 200
LIMIT = 1.0
WITHIN = 20.0  # seconds: a few times the limit, on a loaded 2-core machine; unbounded, the fastest engine takes 160
ORDINARY_REGEX = r"[A-Za-z]+|\d{1,3}|\s+|[^\sA-Za-z\d]+"
TEXTS = [f"Ordinary text number {i}, with words and 12345 digits." for i in range(50)]
LIBRARIES = ("tokenizers", "tokenmill", "rustbpe")


def spec_of(library: str, pattern: str):
    return resolve_spec({"library": library, "pre_tokenizer": "none", "pre_tokenizer_regex": pattern, "vocab_size": 300})


def train(library: str, spec, texts, regex_seconds):
    if library == "tokenizers":
        return with_tokenizers.train(spec, texts, regex_seconds=regex_seconds)
    if library == "tokenmill":
        return train_tokenmill(spec, texts, processes=2, regex_seconds=regex_seconds)
    return train_rustbpe(spec, texts, regex_seconds)


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.slow
def test_a_document_the_regex_backtracks_on_fails_the_training_within_a_few_times_the_limit(library):
    spec = spec_of(library, SLOW_REGEX)  # the submission probe lets it through
    before = {child.pid for child in psutil.Process().children()}
    started = time.monotonic()
    with pytest.raises(SlowRegex) as slow:
        train(library, spec, [*TEXTS, SLOW_DOCUMENT, *TEXTS], LIMIT)
    assert time.monotonic() - started < WITHIN
    reason = slow.value.detail
    assert slow.value.field == "spec.pre_tokenizer_regex"
    assert reason.startswith(f"spec.pre_tokenizer_regex: the custom regex {SLOW_REGEX!r} took over 1s (+1s per 1,000,000 characters) in ")
    # rustbpe splits 8,192 documents at a time: the batch is what it can name.
    assert ("one of documents 1 to 8,192" if library == "rustbpe" else "on document 51:") in reason
    assert {child.pid for child in psutil.Process().children()} <= before  # no counting process left


@pytest.mark.parametrize("library", LIBRARIES)
def test_an_ordinary_custom_regex_trains_to_the_same_tokenizer_as_without_the_limit(library):
    spec = spec_of(library, ORDINARY_REGEX)
    texts = TEXTS * 20
    assert train(library, spec, texts, LIMIT).to_str() == train(library, spec, texts, None).to_str()


def test_a_preset_is_not_checked(monkeypatch):
    # A limit no document meets: the preset trains, the same pattern given as a custom regex does not.
    monkeypatch.setattr(spills, "CHARACTERS_PER_SECOND", 10**12)  # no allowance for length either
    texts = [" ".join(TEXTS * 400), *TEXTS]
    assert with_tokenizers.train(resolve_spec({"vocab_size": 300}), texts, regex_seconds=1e-9).get_vocab_size() > 256
    with pytest.raises(SlowRegex):
        with_tokenizers.train(spec_of("tokenizers", PATTERNS["gpt2"]), texts, regex_seconds=1e-9)


def test_oniguruma_giving_up_on_a_document_is_named():
    # Exponential: Oniguruma stops by itself (its retry limit); without the check in Python's regex first.
    pattern = r"(?:[a-z][0-9]|a\d)+!|\S+|\s+"
    with pytest.raises(SlowRegex, match=r"made the tokenizers regex engine \(Oniguruma\) give up \(over its retry limit"):
        with_tokenizers.train(spec_of("tokenizers", pattern), [*TEXTS, "a1" * 30 + "x"], regex_seconds=None)


def test_fancy_regex_giving_up_on_a_document_is_named_with_its_batch():
    # One run of 2,000 pairs: past fancy_regex's 1,000,000 backtracking steps in one attempt.
    with pytest.raises(SlowRegex, match=r"made rustbpe's regex engine \(fancy_regex\) give up \(over 1,000,000 "
                                        r"backtracking steps in one match attempt\) on one of documents 1 to 8,192"):
        train_rustbpe(spec_of("rustbpe", SLOW_REGEX), [*TEXTS, "a1" * 2000 + "x!"], 600.0)


def test_counting_names_the_document_its_split_ran_too_long_on():
    split = spills.split_by(SLOW_REGEX, None, 0.2)
    with pytest.raises(SlowDocument) as slow:
        spills.count(["a1 b2!", "x", SLOW_DOCUMENT, "y"], split)
    assert slow.value.number == 2


@pytest.mark.slow
def test_the_reason_names_the_corpus_of_the_document(tmp_path):
    store = LocalStore(tmp_path)
    corpora = []
    for name, lines in (("first", TEXTS), ("second", [*TEXTS[:3], SLOW_DOCUMENT])):
        data = "\n".join(lines).encode() + b"\n"
        store.put_bytes(f"corpora/t/{name}", data)
        corpora.append(Corpus(name=name, storage_key=f"corpora/t/{name}", bytes=len(data), format="text",
                              text_field=None, characters=len(data)))
    with pytest.raises(SlowRegex, match="on document 4 of corpus 'second':"):
        train_version_files(spec_of("tokenizers", SLOW_REGEX), store, corpora, lambda *args, **kwargs: None, {},
                            regex_seconds=LIMIT)


def test_batches_pass_the_texts_on_then_empty_ones_to_past_a_whole_batch_and_call_no_one():
    slow: list[tuple[int, int]] = []
    texts = [f"t{i}" for i in range(10)]
    assert list(Batches(texts, 60.0, lambda first, last: slow.append((first, last)), size=4)) == texts + [""] * 3
    assert list(Batches([], 60.0, lambda first, last: slow.append((first, last)), size=4)) == []
    assert slow == []


def test_batches_call_on_slow_with_the_batch_the_engine_stalls_on():
    called = threading.Event()
    slow: list[tuple[int, int]] = []

    def on_slow(first: int, last: int) -> None:
        slow.append((first, last))
        called.set()

    batches = Batches([f"t{i}" for i in range(10)], 0.5, on_slow, size=4)
    texts = iter(batches)
    # An engine that takes two batches, the second right after the first, then stalls on the second.
    assert [text for _, text in zip(range(8), texts)] == [f"t{i}" for i in range(8)]
    assert batches.in_flight() == (4, 7)
    assert called.wait(30), "a stalled batch was never reported"
    assert slow == [(4, 7)]


@pytest.mark.slow
def test_a_slow_read_of_the_texts_is_not_blamed_on_the_regex():
    called = threading.Event()

    def texts():
        yield from ["t0", "t1", "t2", "t3"]
        # The store is slow to give the first text of the next batch: longer than the limit.
        assert not called.wait(1.5), "the time spent reading was counted against the batch before it"
        yield "t4"

    batches = Batches(texts(), 0.2, lambda first, last: called.set(), size=4)
    assert list(batches) == ["t0", "t1", "t2", "t3", "t4", "", "", "", ""]
