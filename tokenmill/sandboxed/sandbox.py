"""Bounded processes for work that may never end: running a tokenizer's own regex on a text.

A custom pre-tokenization regex runs on Oniguruma, a backtracking engine: `(b+)+c` takes
exponential time on text made to fail it, inside Rust code that holds the GIL and cannot be
interrupted. So encodes (and the submission probe of a regex) run here, in a small pool of
warm processes, one per request in flight, up to a bound. Each is a fresh interpreter
(`python -c`, fork+exec as multiprocessing's `spawn` does, so nothing is inherited from a
process holding threads or database connections, but without spawn's re-import of the
parent's `__main__`, which re-runs an unguarded script) talking over a socket pair.
A request that passes its wall-time limit, or whose process grows past the memory limit, has
its process killed (and a warm one started in its place); the caller gets an exception it
turns into a 422. All processes busy for `BUSY_WAIT` seconds: `Busy` (503, Retry-After), and
one owner (a team) may hold at most half of them, so a team's slow texts leave room for others.

Memory is watched, not limited with RLIMIT_AS: tokenizers' threads and glibc's per-thread
arenas reserve far more address space than they touch, so an address-space limit would
refuse ordinary work. The parent reads the child's resident size while it waits.

Each process keeps the tokenizers it loaded (least recently used out), under the caller's
key: a version id and the sha256 of its tokenizer.json, so repeated encodes skip the load.
Sampled encodes (tokenmill.sandboxed.subword_sampling: BPE-dropout, Unigram sampling) keep their
samplers the same way, under a key of their own; each is seeded per request, so which process
answers does not change the ids.

Deliberately not handled: tiktoken reference encodes (fixed patterns, linear in the text:
they stay in the caller's process), sharing loaded tokenizers between processes, and
Windows/macOS fine points (spawn works there; the memory watch needs psutil, a dependency).
"""

import atexit
import importlib
import logging
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

import psutil

from tokenmill.errors import Busy, Failed, InvalidInput, OverMemory, ShareBusy, TimedOut

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from tokenmill.sandboxed.subword_sampling import TokenizersSampler

log = logging.getLogger(__name__)

PROCESSES = 4  # at most this many encodes run at once
WARM = 2  # processes kept started and idle, ready for the next request
MEMORY_BYTES = 1024**3  # a process over this resident size is killed (its text blamed)
KEPT = 4  # loaded tokenizers per process
BUSY_WAIT = 1.0  # seconds a request waits for a free process before `Busy`
START_SECONDS = 60.0  # a new process imports tokenizers and says it is ready
LOAD_SECONDS = 60.0  # parsing a large tokenizer.json is not the text's fault: its own limit
WARM_MODULES = ("tokenmill.playground.bpe_json", "tokenmill.training.regex_check")
SANDBOX_NICENESS = 10  # added to the sandbox processes' nice value: the API's own threads come first
WATCH_SECONDS = 0.05  # how often the parent looks at a working process's memory

ROOT = str(Path(__file__).resolve().parent.parent)  # where the child imports tokenmill from

Encoded = tuple[list[int], list[str], list[tuple[int, int]]]
Message = tuple[object, ...]  # (work, *args): what a process is asked to do
# What a process keeps loaded, under the caller's keys: tokenizers, and (keys of their own) samplers.
_Cache: TypeAlias = "OrderedDict[str, Tokenizer | TokenizersSampler]"


# ---- the child: a loop answering one message at a time --------------------------------------

class _Miss(Exception):
    """The tokenizer asked for is not loaded in this process."""


def _encode(cache: _Cache, key: str, text: str) -> Encoded:
    from tokenizers import Tokenizer

    tokenizer = _cached(cache, key)
    assert isinstance(tokenizer, Tokenizer)  # a sampler's key is never an encode's
    encoding = tokenizer.encode(text, add_special_tokens=False)
    return encoding.ids, encoding.tokens, encoding.offsets


def _load(cache: _Cache, key: str, tokenizer_json: str) -> None:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    tokenizer.encode_special_tokens = True  # special-token text in a text encodes as text
    _keep(cache, key, tokenizer)


def _sample(cache: _Cache, key: str, text: str, sampling: dict[str, Any]) -> Encoded:
    from tokenmill.sandboxed.subword_sampling import Sampling, TokenizersSampler

    sampler = _cached(cache, key)
    assert isinstance(sampler, TokenizersSampler)  # an encode's key is never a sampler's
    return sampler.encode(text, Sampling(**sampling))


def _load_sampler(cache: _Cache, key: str, tokenizer_json: str) -> None:
    from tokenmill.sandboxed.subword_sampling import sampler

    _keep(cache, key, sampler(tokenizer_json))


def _cached(cache: _Cache, key: str) -> "Tokenizer | TokenizersSampler":
    """The loaded tokenizer or sampler of a key, now the most recently used; _Miss if it is not loaded."""
    if key not in cache:
        raise _Miss(key)
    cache.move_to_end(key)
    return cache[key]


def _keep(cache: _Cache, key: str, loaded: "Tokenizer | TokenizersSampler") -> None:
    """Keep what was loaded, forgetting the least recently used past KEPT."""
    cache[key] = loaded
    while len(cache) > KEPT:
        cache.popitem(last=False)


def _split(cache: _Cache, pattern: str, texts: list[str]) -> int:
    """Split each text with the pattern as training does (`Split(Regex, "isolated")`)."""
    from tokenizers import Regex, pre_tokenizers

    splitter = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    return sum(len(splitter.pre_tokenize_str(text)) for text in texts)


def _call(cache: _Cache, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Call `module:function` of tokenmill (imported here, so the caller's layer need not import it)."""
    module, _, name = target.partition(":")
    if not module.startswith("tokenmill."):
        raise ValueError(f"not a tokenmill function: {target}")
    return getattr(importlib.import_module(module), name)(*args, **kwargs)


_WORK: dict[str, Callable[..., Any]] = {"encode": _encode, "load": _load, "sample": _sample,
                                        "load_sampler": _load_sampler, "split": _split, "call": _call}


def serve(fd: int) -> None:
    """The child's loop on the socket `fd`: one (work, *args) message in, one (status, value) reply out."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us
    # Work on request data yields the cores to the process that answers reads (and to other teams' API work).
    os.nice(SANDBOX_NICENESS)
    import tokenizers  # noqa: F401  (warm: imported before the first request)
    for module in WARM_MODULES:  # what the calls run, imported before the first one waits for it
        importlib.import_module(module)

    conn = Connection(fd)
    cache: _Cache = OrderedDict()
    conn.send(("ready", os.getpid()))
    while True:
        try:
            work, *args = conn.recv()
        except (EOFError, OSError):
            return  # the parent closed our pipe or died
        try:
            reply = ("ok", _WORK[work](cache, *args))
        except _Miss:
            reply = ("miss", None)
        except InvalidInput as exc:  # a refusal the caller passes on as it is, naming its field
            reply = ("refused", (exc.detail, exc.field))
        except Exception as exc:
            reply = ("error", f"{type(exc).__name__}: {exc}")
        except BaseException as exc:  # pyo3's PanicException (a regex engine giving up) is one
            if isinstance(exc, SystemExit):
                raise
            reply = ("panic", str(exc))
        conn.send(reply)


# ---- the parent: a pool of such processes ---------------------------------------------------

@dataclass(eq=False)
class _Worker:
    process: subprocess.Popen[bytes]
    conn: Connection
    ready: bool = False
    dead: bool = False
    started: float = field(default_factory=time.monotonic)

    def rss(self) -> int:
        try:
            return psutil.Process(self.process.pid).memory_info().rss
        except psutil.Error:
            return 0

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.dead = True
        self.conn.close()
        if self.alive():
            self.process.kill()
        self.process.wait()


class Sandbox:
    """A bounded pool of processes for encodes and regex probes (see the module docstring)."""

    def __init__(self, timeout: float, size: int = PROCESSES, warm: int = WARM,
                 memory_bytes: int = MEMORY_BYTES, wait: float = BUSY_WAIT) -> None:
        self.timeout, self.size, self.warm = timeout, size, min(warm, size)
        self.memory_bytes, self.wait = memory_bytes, wait
        self.per_owner = max(1, size // 2)
        self._changed = threading.Condition()
        self._idle: list[_Worker] = []
        self._busy: Counter[str | None] = Counter()
        self._count = 0  # idle + busy processes
        self._closed = False
        # What operators see (GET /metrics): checkouts, time spent waiting for a process, refusals.
        self._checkouts = 0
        self._wait_seconds = 0.0
        self._refusals = 0
        with self._changed:
            self._top_up()

    def encode(self, key: str, text: str, tokenizer_json: Callable[[], str], owner: str | None = None) -> Encoded:
        """Ids, tokens and offsets of `text` under the tokenizer `key` names; `tokenizer_json`
        is called only when the process that takes the request has not loaded it yet."""
        return cast(Encoded, self._loaded(("encode", key, text), lambda: ("load", key, tokenizer_json()), owner))

    def sample(self, key: str, text: str, sampling: dict[str, Any], tokenizer_json: Callable[[], str],
               owner: str | None = None) -> Encoded:
        """A sampled encode of `text` (tokenmill.sandboxed.subword_sampling, `sampling` as `Sampling.as_dict()`) with the
        sampler `key` names; `tokenizer_json` is called only when the process has not loaded it yet."""
        return cast(Encoded, self._loaded(("sample", key, text, sampling),
                                          lambda: ("load_sampler", key, tokenizer_json()), owner))

    def _loaded(self, message: Message, load: Callable[[], Message], owner: str | None) -> Any:
        """Run `message` in a process, first sending it `load()` if it has not loaded what the message names;
        its reply's value, unpickled (what the child's work returned: the callers know its type)."""
        with self._checkout(owner) as worker:
            status, value = self._run(worker, message, self.timeout)
            if status == "miss":
                self._run(worker, load(), LOAD_SECONDS)
                status, value = self._run(worker, message, self.timeout)
            return value

    def split(self, pattern: str, texts: list[str], timeout: float, owner: str | None = None) -> int:
        """How many pieces the tokenizers Split pre-tokenizer cuts the texts into, within `timeout`."""
        with self._checkout(owner) as worker:
            return cast(int, self._run(worker, ("split", pattern, texts), timeout)[1])

    def call(self, target: str, *args: Any, timeout: float, owner: str | None, **kwargs: Any) -> Any:
        """`module:function`(*args, **kwargs) of tokenmill in a process of the pool, within `timeout`
        and the memory limit: work on a request's data that must not hold the caller's process
        (compiling a submitted regex, BPE steps). Its InvalidInput is raised here as it was there;
        its value must pickle."""
        with self._checkout(owner) as worker:
            return self._run(worker, ("call", target, args, kwargs), timeout)[1]

    def stats(self) -> dict[str, float]:
        """The pool's size and use now, and its totals since it started (for GET /metrics)."""
        with self._changed:
            busy = sum(self._busy.values())
            return {"size": self.size, "busy": busy, "idle": len(self._idle), "checkouts_total": self._checkouts,
                    "wait_seconds_total": self._wait_seconds, "busy_refusals_total": self._refusals}

    def close(self) -> None:
        """Stop every process; busy ones are stopped when their request ends."""
        with self._changed:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._changed.notify_all()
        for worker in idle:
            worker.kill()

    @contextmanager
    def _checkout(self, owner: str | None) -> Iterator[_Worker]:
        worker = self._take(owner)
        try:
            if not worker.ready:
                self._wait_ready(worker)
            yield worker
        finally:
            self._give_back(worker, owner)

    def _take(self, owner: str | None) -> _Worker:
        began = time.monotonic()
        deadline = began + self.wait
        with self._changed:
            while True:
                if self._closed:
                    raise Busy("the encoding processes are shutting down", 5)
                mine = owner is not None and self._busy[owner] >= self.per_owner
                if not mine and (self._idle or self._count < self.size):
                    worker = self._idle.pop() if self._idle else self._start()
                    if not worker.alive():  # died while idle (killed from outside)
                        self._count -= 1
                        worker.kill()
                        continue
                    self._busy[owner] += 1
                    self._checkouts += 1
                    self._wait_seconds += time.monotonic() - began
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._refusals += 1
                    self._wait_seconds += time.monotonic() - began
                    if mine:  # the team's own share: its rate, not the service's state
                        raise ShareBusy(f"your team's {self.per_owner} sandbox processes are all busy with its other "
                                        "requests; try again shortly", math.ceil(self.timeout))
                    raise Busy("all sandbox processes are busy with other texts; try again shortly",
                               math.ceil(self.timeout))
                self._changed.wait(remaining)
        return worker

    def _give_back(self, worker: _Worker, owner: str | None) -> None:
        # A process grown past half its limit (tokenizers it keeps) is replaced before it is blamed for a text.
        retire = not worker.dead and (self._closed or worker.rss() > self.memory_bytes // 2)
        if retire:
            worker.kill()
        with self._changed:
            self._busy[owner] -= 1
            if self._busy[owner] <= 0:
                del self._busy[owner]
            if worker.dead:
                self._count -= 1
                if not self._closed:
                    self._top_up()
            else:
                self._idle.append(worker)
            self._changed.notify_all()

    def _start(self) -> _Worker:
        """A new process (counted); called with the lock held. Starting is quick: the child
        imports in the background and says "ready" on its socket."""
        ours, theirs = socket.socketpair()
        code = (f"import sys; sys.path.insert(0, {ROOT!r}); "
                f"from tokenmill.sandboxed.sandbox import serve; serve({theirs.fileno()})")
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "RUST_BACKTRACE": "0"}
        try:
            process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()], env=env,
                                       stdin=subprocess.DEVNULL)
        finally:
            theirs.close()  # the child's end: once it dies, reading ours ends instead of waiting
        self._count += 1
        return _Worker(process, Connection(ours.detach()))

    def _top_up(self) -> None:
        while len(self._idle) < self.warm and self._count < self.size:
            self._idle.append(self._start())

    def _wait_ready(self, worker: _Worker) -> None:
        try:
            if worker.conn.poll(max(0.0, START_SECONDS - (time.monotonic() - worker.started))):
                worker.conn.recv()
                worker.ready = True
                return
        except (EOFError, OSError):
            pass
        worker.kill()
        raise Busy("an encoding process failed to start; try again", 5)

    def _run(self, worker: _Worker, message: Message, timeout: float) -> tuple[str, Any]:
        """Send one message and wait for its reply, killing the process past `timeout` or the memory limit."""
        deadline = time.monotonic() + timeout
        try:
            worker.conn.send(message)
            # Wait in short steps, looking at the process's memory between them.
            while not worker.conn.poll(min(WATCH_SECONDS, max(0.0, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    self._kill(worker, f"{message[0]} took longer than {timeout:g}s")
                    raise TimedOut(f"{message[0]} took longer than {timeout:g}s")
                if worker.rss() > self.memory_bytes:
                    self._kill(worker, f"{message[0]} needed more than {self.memory_bytes // 2**20} MiB")
                    raise OverMemory(f"{message[0]} needed more than {self.memory_bytes // 2**20} MiB")
            status, value = worker.conn.recv()
        except (EOFError, OSError):
            worker.kill()
            raise Failed(f"its process died (exit code {worker.process.poll()})", "died") from None
        if status in ("error", "panic"):
            raise Failed(value, status)
        if status == "refused":
            detail, field_name = value
            raise InvalidInput(detail, field=field_name)
        return status, value

    @staticmethod
    def _kill(worker: _Worker, why: str) -> None:
        log.warning("killing sandbox process %s: %s", worker.process.pid, why)
        worker.kill()


_current: Sandbox | None = None
_lock = threading.Lock()


def start(timeout: float | None = None) -> Sandbox:
    """The process-wide sandbox, started now if it is not (for a lifespan; `current()` starts it lazily)."""
    global _current
    with _lock:
        if _current is None:
            if timeout is None:
                from tokenmill.settings import get_settings

                timeout = get_settings().encode_timeout_seconds
            _current = Sandbox(timeout)
            atexit.register(close)
        return _current


def running() -> Sandbox | None:
    """The process-wide sandbox if one is running; never starts one (for the operators' metrics)."""
    return _current


def current() -> Sandbox:
    """The process-wide sandbox, started on first use and stopped at exit."""
    return _current or start()


def close() -> None:
    """Stop the process-wide sandbox (a later `current()` starts a new one)."""
    global _current
    with _lock:
        sandbox, _current = _current, None
    if sandbox is not None:
        sandbox.close()
