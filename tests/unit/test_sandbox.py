"""The sandbox's processes: encodes equal in-process ones, are cached, and are cut short by the
time limit, the memory watch or a regex engine's panic; a full pool answers Busy."""

import json
import threading
import time

import pytest
from tokenizers import Tokenizer

from tests.waiting import until
from tokenmill.errors import Failed, OverMemory, TimedOut
from tokenmill.sandboxed.sandbox import Busy, Sandbox
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec

CATASTROPHIC = "(b+)+c"
SLOW_TEXT = ("b" * 23 + "!") * 200  # about 0.3 s of Oniguruma's backtracking per run: a minute in all
GENEROUS = 20  # seconds past a limit that a loaded machine may take to notice it


@pytest.fixture(scope="module")
def tokenizer_json() -> str:
    lines = ["the boy plays in the garden", "bbb ccc !!! 1234", "tokenizers turn text into numbers"] * 20
    return with_tokenizers.train(resolve_spec({"vocab_size": 300}), lines).to_str()


@pytest.fixture(scope="module")
def catastrophic_json(tokenizer_json) -> str:
    """The same tokenizer, splitting with a regex the submission probe would refuse."""
    data = json.loads(tokenizer_json)
    data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = CATASTROPHIC
    return json.dumps(data)


@pytest.fixture
def sandbox():
    pool = Sandbox(timeout=1.5, size=2, warm=1)
    yield pool
    pool.close()


def test_encodes_as_in_process_and_loads_each_tokenizer_once(sandbox, tokenizer_json):
    loads = []

    def source() -> str:
        loads.append(1)
        return tokenizer_json

    text = "the boy plays with <|endoftext|> in the garden"
    expected = Tokenizer.from_str(tokenizer_json)
    expected.encode_special_tokens = True
    encoding = expected.encode(text, add_special_tokens=False)
    for _ in range(3):
        ids, tokens, offsets = sandbox.encode("v1:sha", text, source)
        assert (ids, tokens, [tuple(o) for o in offsets]) == (encoding.ids, encoding.tokens, encoding.offsets)
    assert len(loads) == 1  # one process served all three (it is given back idle): one load


@pytest.mark.slow
def test_a_slow_regex_is_killed_at_the_time_limit_and_its_process_replaced(sandbox, catastrophic_json, tokenizer_json):
    started = time.monotonic()
    with pytest.raises(TimedOut):
        sandbox.encode("slow:sha", SLOW_TEXT, lambda: catastrophic_json)
    assert time.monotonic() - started < sandbox.timeout + GENEROUS
    ids, _, _ = sandbox.encode("v1:sha", "the garden", lambda: tokenizer_json)
    assert ids


def test_a_regex_engine_panic_is_a_failure_of_kind_panic(sandbox, catastrophic_json):
    # Past Oniguruma's retry limit (a run of 24 or more b's), tokenizers panics instead of answering.
    with pytest.raises(Failed) as failed:
        sandbox.encode("slow:sha", "b" * 3000 + "!", lambda: catastrophic_json)
    assert failed.value.kind == "panic" and "retry-limit" in str(failed.value)


def test_a_process_over_the_memory_limit_is_killed():
    pool = Sandbox(timeout=60, size=1, warm=1, memory_bytes=1024**2)  # any interpreter is past 1 MiB
    try:
        started = time.monotonic()
        with pytest.raises(OverMemory):
            pool.split(CATASTROPHIC, [SLOW_TEXT], timeout=60)
        assert time.monotonic() - started < GENEROUS
    finally:
        pool.close()


@pytest.mark.slow
def test_a_full_pool_answers_busy_and_one_owner_cannot_take_it_all(catastrophic_json, tokenizer_json):
    pool = Sandbox(timeout=4, size=2, warm=2, wait=0.2)
    try:
        pool.encode("v1:sha", "warm", lambda: tokenizer_json, owner="b")  # both processes started and ready
        outcome = []

        def slow_encode() -> None:
            try:
                pool.encode("slow:sha", SLOW_TEXT, lambda: catastrophic_json, owner="a")
            except TimedOut as exc:
                outcome.append(exc)

        slow = threading.Thread(target=slow_encode)
        slow.start()
        until(pool.stats, lambda stats: stats["busy"] >= 1, 30, every=0.01)  # the slow encode holds a process
        with pytest.raises(Busy) as busy:  # team a holds its share (half the pool): its own rate, a 429
            pool.encode("v1:sha", "more", lambda: tokenizer_json, owner="a")
        assert busy.value.status == 429 and busy.value.retry_after >= 4
        assert pool.encode("v1:sha", "the garden", lambda: tokenizer_json, owner="b")[0]  # team b is served
        slow.join()
        assert len(outcome) == 1
    finally:
        pool.close()


def test_an_idle_process_killed_from_outside_is_replaced(tokenizer_json):
    pool = Sandbox(timeout=5, size=1, warm=1)
    try:
        assert pool.encode("v1:sha", "warm", lambda: tokenizer_json)[0]
        pool._idle[0].process.kill()
        pool._idle[0].process.wait()
        assert pool.encode("v1:sha", "again", lambda: tokenizer_json)[0]
    finally:
        pool.close()


def test_sandbox_processes_yield_the_cores(tokenizer_json):
    import psutil

    pool = Sandbox(timeout=5, size=1, warm=1)
    try:
        assert pool.encode("v1:sha", "warm", lambda: tokenizer_json)[0]
        child = psutil.Process(pool._idle[0].process.pid)
        assert child.nice() >= psutil.Process().nice() + 10
    finally:
        pool.close()
