"""Polling for the end-to-end and browser suites: read something until it is done, within a deadline."""

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
UNFINISHED = ("queued", "running")


def until(read: Callable[[], T], done: Callable[[T], bool], timeout: float, every: float = 0.5) -> T:
    """Call `read` every `every` seconds until `done` holds for what it gave; fail, showing the
    last value read, once `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while not done(value := read()):
        assert time.monotonic() < deadline, f"still not done after {timeout} s: {value!r}"[:2000]
        time.sleep(every)
    return value


def finished(http, path: str, timeout: float = 300) -> dict:
    """GET `path` (a job or an evaluation run) until its status is neither queued nor running."""
    return until(lambda: http.get(path).json(), lambda item: item["status"] not in UNFINISHED, timeout)
