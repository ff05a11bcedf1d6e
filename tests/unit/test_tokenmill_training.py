"""Byte-level BPE trained by Tokenmill's engine: library rustbpe's files, counted on many processes."""

import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest

from tests.services import FIXTURES
from tests.text import flores_lines
from tests.waiting import until
from tokenmill.errors import InvalidInput
from tokenmill.training import with_tokenmill
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents
from tokenmill.training.with_rustbpe import train_rustbpe
from tokenmill.training.with_tokenmill import train_tokenmill

SPECIALS = ["<|endoftext|>", "<|pad|>"]
# A preset without a normalizer is counted by the compiled splitter on threads of the job's
# process; with a normalizer (or a custom regex), by `regex` in counting children.
CHILDREN = {"library": "tokenmill", "vocab_size": 300, "normalization": "nfc"}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    def head(path, count):
        with path.open(encoding="utf-8") as handle:
            return [line.rstrip("\n") for _, line in zip(range(count), handle)]

    lines = head(FIXTURES / "manpages" / "eng_Latn.txt", 1500) + head(FIXTURES / "code" / "python.txt", 800)
    return lines + flores_lines(60, 0, ("eng_Latn", "rus_Cyrl", "zho_Hans", "arb_Arab", "hin_Deva"))


@pytest.mark.parametrize("extra", [
    {"pre_tokenizer": "gpt2"},
    {"pre_tokenizer": "cl100k", "normalization": "nfkc", "lowercase": True},
    {"pre_tokenizer": "o200k", "normalization": "nfd"},
    {"pre_tokenizer": "none", "pre_tokenizer_regex": r"[A-Za-z]+|\d|\s+|[^A-Za-z\d\s]+"},
])
def test_every_file_is_the_one_library_rustbpe_makes(texts, extra):
    raw = {"vocab_size": 1500, "special_tokens": SPECIALS, **extra}
    ours = resolve_spec({**raw, "library": "tokenmill"})
    theirs = resolve_spec({**raw, "library": "rustbpe"})
    ours_files = version_contents(ours, train_tokenmill(ours, texts), {}, {})
    theirs_files = version_contents(theirs, train_rustbpe(theirs, texts), {}, {})
    manifest = "manifest.json"  # it names the library
    assert sorted(ours_files) == sorted(theirs_files) and len(ours_files) >= 6
    assert {k: v for k, v in ours_files.items() if k != manifest} == {k: v for k, v in theirs_files.items()
                                                                       if k != manifest}


def test_any_number_of_processes_and_any_order_of_the_texts_give_the_same_tokenizer(texts):
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 1200, "special_tokens": SPECIALS})
    one = train_tokenmill(spec, texts, processes=1).to_str()
    assert one == train_tokenmill(spec, iter(texts[::-1]), processes=3).to_str()
    assert one == train_tokenmill(spec, texts * 2, processes=2).to_str()  # every count doubled: every comparison kept


@pytest.mark.parametrize("preset", ["gpt2", "cl100k", "o200k"])
def test_the_compiled_splitter_on_threads_gives_the_tokenizer_of_the_counting_children(texts, monkeypatch, preset):
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 1500, "special_tokens": SPECIALS, "pre_tokenizer": preset})
    threaded = train_tokenmill(spec, texts, processes=2).to_str()
    monkeypatch.setattr(with_tokenmill, "_compiled_preset", lambda pattern: None)
    before = {child.pid for child in psutil.Process().children()}
    assert train_tokenmill(spec, texts, processes=2).to_str() == threaded
    assert before == {child.pid for child in psutil.Process().children()}


@pytest.mark.parametrize("extra", [{}, CHILDREN])
def test_only_the_learners_own_copy_of_the_counts_is_held_while_it_learns(texts, monkeypatch, extra):
    # Counted on threads or in children: by the time the merges are learned, every array the
    # counting gave is gone (15 MiB on 100 MB of mixed text), but for what the learner made of it.
    import gc
    import weakref

    from tokenmill.training import merge_learner

    given, alive_then = [], []
    count, learned = with_tokenmill.learned_from_counts, merge_learner.learned

    def counted(spec, counting):
        def watched():
            counts = counting()
            given.extend(weakref.ref(array) for array in counts)
            return counts
        return count(spec, watched)

    def learning(pieces, merges):
        gc.collect()
        alive_then.extend(ref() is not None for ref in given)
        return learned(pieces, merges)

    monkeypatch.setattr(with_tokenmill, "learned_from_counts", counted)
    monkeypatch.setattr(merge_learner, "learned", learning)
    spec = resolve_spec({"library": "tokenmill", **extra, "vocab_size": 600})
    assert train_tokenmill(spec, texts, processes=2).get_vocab_size() == 600
    assert len(given) == 3 and alive_then == [False] * 3


def test_a_stop_while_threads_count_leaves_no_counting_thread():
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 300})

    def texts():
        yield from ["some text"] * 100_000
        raise KeyboardInterrupt  # as a time limit or a cancel arrives

    with pytest.raises(KeyboardInterrupt):
        train_tokenmill(spec, texts(), processes=2)
    assert until(lambda: [t for t in threading.enumerate() if t.name == "tokenmill-split"], lambda left: not left, 5) == []


def test_a_document_rustbpes_regex_engine_gives_up_on_is_counted():
    # fancy_regex overflows on gpt2's `\s+(?!\S)` over a million spaces; Python's regex does not.
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 300})
    tokenizer = train_tokenmill(spec, ["fine text"] * 5 + [" " * 1_000_000 + "x"])
    assert "ĠĠ" in tokenizer.get_vocab()


@pytest.mark.parametrize(("raw", "field"), [
    ({"byte_level": False, "pre_tokenizer": "metaspace"}, "algorithm"),
    ({"pre_tokenizer": "none"}, "pre_tokenizer"),
    ({"split_digits": True}, "split_digits"),
    ({"max_token_length": 16}, "max_token_length"),
])
def test_what_it_cannot_train_is_refused_by_field_naming_it(raw, field):
    with pytest.raises(InvalidInput, match=f"spec.{field}: tokenmill ") as refused:
        resolve_spec({"library": "tokenmill", "vocab_size": 1000, **raw})
    assert refused.value.field == f"spec.{field}"


def test_a_counting_process_that_fails_fails_the_training_with_what_it_said(monkeypatch):
    monkeypatch.setattr(with_tokenmill, "CHILD", "import sys; sys.stderr.write('out of luck'); sys.exit(5)")
    spec = resolve_spec(CHILDREN)
    before = {child.pid for child in psutil.Process().children()}
    with pytest.raises(RuntimeError, match=r"counting process failed \(exit 5\): out of luck"):
        train_tokenmill(spec, ["some text"] * 200_000, processes=2)
    assert {child.pid for child in psutil.Process().children()} <= before  # none left behind


def test_one_counting_process_failing_fails_the_training_while_the_others_still_wait(monkeypatch, tmp_path):
    # The first child to start fails; the other would count for ever if nobody ended it.
    marker = tmp_path / "first"
    monkeypatch.setattr(with_tokenmill, "CHILD", (
        "import os, sys\n"
        f"try:\n    os.close(os.open({str(marker)!r}, os.O_CREAT | os.O_EXCL))\n"
        "except FileExistsError:\n    from tokenmill.training.with_tokenmill import serve; serve()\n"
        "sys.stderr.write('the first one fails'); sys.exit(5)"))
    spec = resolve_spec(CHILDREN)
    before = {child.pid for child in psutil.Process().children()}
    outcome: list[BaseException] = []

    def train() -> None:
        try:
            train_tokenmill(spec, ["some text"] * 300_000, processes=2)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=train)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the training waited for ever on the child that did not fail"
    assert len(outcome) == 1 and isinstance(outcome[0], RuntimeError)
    assert "exit 5" in str(outcome[0]) and "the first one fails" in str(outcome[0])
    assert {child.pid for child in psutil.Process().children()} <= before
    assert until(lambda: [t for t in threading.enumerate() if t.name == "tokenmill-feed"], lambda left: not left, 5) == []


def test_a_stop_while_it_feeds_the_texts_leaves_no_counting_process():
    spec = resolve_spec(CHILDREN)
    before = {child.pid for child in psutil.Process().children()}

    def texts():
        yield from ["some text"] * 1000
        raise KeyboardInterrupt  # as a time limit or a cancel arrives

    with pytest.raises(KeyboardInterrupt):
        train_tokenmill(spec, texts(), processes=2)
    assert {child.pid for child in psutil.Process().children()} <= before


STUCK = """
from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_tokenmill import train_tokenmill

# A pattern that backtracks for ever on its text (the submission's probe would refuse it: set
# here past it), so a counting child is busy and never reads the end of its stdin.
spec = resolve_spec({"library": "tokenmill", "vocab_size": 3000, "pre_tokenizer": "none", "pre_tokenizer_regex": "a+"})
spec = spec.model_copy(update={"pre_tokenizer_regex": "(a|aa)+$"})
train_tokenmill(spec, ["a" * 80 + "b"], processes=1)
"""


@pytest.mark.slow
def test_a_counting_process_stuck_in_a_regex_dies_with_its_job_process_killed_by_signal_9():
    job = subprocess.Popen([sys.executable, "-c", STUCK], cwd=REPO)
    try:
        counting = until(lambda: [child for child in psutil.Process(job.pid).children()
                                  if "with_tokenmill" in " ".join(child.cmdline())], bool, 30, every=0.1)[0]
        until(counting.cpu_times, lambda times: times.user > 1.0, 30, every=0.2)  # it is backtracking
    finally:
        job.kill()
        job.wait()
    # The end of its stdin would never be read: the kernel kills it with its parent (PR_SET_PDEATHSIG).
    assert until(lambda: counting.is_running() and counting.status() != psutil.STATUS_ZOMBIE,
                 lambda alive: not alive, 5, every=0.1) is False
