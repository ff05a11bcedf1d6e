"""The heartbeat of claimed work: it keeps the claim alive, guards memory, and ends work whose claim is gone.

A thread beside the work (tokenmill.queued_work.claims says what a claim is). It also ends the worker
process when the work goes on after its claim was lost, or when the process holds more memory
than the job may: Celery then replaces the process and redelivers its task.
"""

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable

import psutil
from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction
from tokenmill.queued_work.claims import Claims, beat, kept
from tokenmill.queued_work.limits import WorkLimits

log = logging.getLogger(__name__)

# A worker process ended by its heartbeat exits with these codes (sysexits.h: EX_SOFTWARE, EX_TEMPFAIL).
EXIT_OVER_MEMORY = 70
EXIT_STOPPED = 75


JOB_MEMORY_ADVICE = "train on fewer documents (max_sentences) or ask for a smaller vocabulary"


class Heartbeat:
    """Touches a claim every `heartbeat_seconds`, guards this process's memory, and ends work
    whose claim is gone.

    A thread, so that it beats while a library trains or encodes in native code (both release
    the GIL while they work). `touch` writes the beat and says whether the claim is still
    ours; `held`, a cheap read, says so every second between beats (a claim that ended by our
    own hand, a success, still counts as held). When the claim is gone (cancelled, failed or
    taken over), the work has `stop_grace` seconds to notice at a progress report; then `stop`
    is called (it removes what the work wrote, unless another attempt owns it) and the process
    ends with its children: a native trainer or a backtracking regex never reports, and would
    hold a worker slot for hours. Likewise when the process and its children hold more than
    `max_memory` bytes: `give_up` is told why and the process ends at once, before the kernel's
    OOM killer picks a process of its own choosing. Either way Celery replaces the process and
    redelivers its task, which finds the row ended and starts the next one.
    """

    def __init__(self, factory: sessionmaker[Session], touch: Callable[[Session], bool], limits: WorkLimits,
                 give_up: Callable[[str], object] | None = None, check_memory_every: float = 1.0,
                 held: Callable[[Session], bool] | None = None, stop: Callable[[], object] | None = None,
                 memory_advice: str = JOB_MEMORY_ADVICE) -> None:
        self.factory, self.touch, self.give_up, self.held, self.stop = factory, touch, give_up, held, stop
        self.memory_advice = memory_advice
        self.every, self.check_every, self.grace = limits.heartbeat_seconds, check_memory_every, limits.stop_grace
        self.max_memory = limits.max_memory if give_up is not None else None
        self.lost = False  # the claim is no longer ours (cancelled, failed or taken over)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="heartbeat")

    @classmethod
    def of_claim(cls, factory: sessionmaker[Session], claims: Claims, row: ColumnElement[bool], attempt: int,
                 limits: WorkLimits, give_up: Callable[[str], object] | None = None,
                 stop: Callable[[], object] | None = None, memory_advice: str = JOB_MEMORY_ADVICE) -> "Heartbeat":
        """The heartbeat of a claim in its attempt (`row` selects the claimed row): it beats on the
        claim, and reads every second whether the claim is still kept."""
        return cls(factory, lambda session: beat(session, claims, row, attempt), limits, give_up,
                   held=lambda session: kept(session, claims, row, attempt), stop=stop, memory_advice=memory_advice)

    def __enter__(self) -> "Heartbeat":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        process = psutil.Process()
        fast = bool(self.max_memory) or self.held is not None
        tick = min(self.every, self.check_every) if fast else self.every
        last_beat = time.monotonic()
        lost_since: float | None = None
        while not self._stop.wait(tick):
            if self.max_memory and self.give_up is not None and over_memory(process, self.max_memory):
                self._out_of_memory(self.max_memory, self.give_up)
            if time.monotonic() - last_beat >= self.every:
                last_beat = time.monotonic()
                self._beat()
            elif self.held is not None:
                self._check(self.held)
            if self.lost and self.stop is not None:
                lost_since = lost_since or time.monotonic()
                if time.monotonic() - lost_since >= self.grace and not self._stop.is_set():
                    self._end_lost_work(self.stop)

    def _beat(self) -> None:
        try:
            with transaction(self.factory) as session:
                self.lost = not self.touch(session) and not (self.held is not None and self.held(session))
        except Exception:
            log.warning("heartbeat failed; the database may be away", exc_info=True)  # the next beat tries again

    def _check(self, held: Callable[[Session], bool]) -> None:
        try:
            with self.factory() as session:
                self.lost = not held(session)
        except Exception:
            pass  # the database may be away: the next beat says so, and tries again

    def _end_lost_work(self, stop: Callable[[], object]) -> None:
        try:
            stop()
        except Exception:
            log.warning("could not clean up after lost work; reconciliation will", exc_info=True)
        finally:
            log.warning("its claim is gone (cancelled, failed or taken over) and the work goes on: "
                        "ending the worker process")
            end_process(EXIT_STOPPED)

    def _out_of_memory(self, limit: int, give_up: Callable[[str], object]) -> None:
        message = f"it used more than {limit / 2**30:.1f} GiB of memory (TOKENMILL_JOB_MAX_MEMORY_BYTES); {self.memory_advice}"
        try:
            give_up(message)
        finally:
            log.error("%s; ending the worker process", message)
            end_process(EXIT_OVER_MEMORY)


def end_process(code: int) -> None:
    """End this process and every process it started, at once (children first: a trainer's
    child holding the GIL or a pipe would otherwise outlive it)."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            child.kill()
    os._exit(code)


def resident_memory(process: psutil.Process) -> int:
    """Bytes a process and its children hold, by resident set size: cheap to read, but a page a
    forked child shares with its parent counts twice."""
    return rss([process, *process.children(recursive=True)])


def rss(members: list[psutil.Process]) -> int:
    """The resident set sizes of these processes, added up (one that ended meanwhile counts 0)."""
    return _summed(members, lambda member: member.memory_info().rss)


def proportional_memory(process: psutil.Process) -> int:
    """Bytes a process and its children hold, by proportional set size: a shared page counts
    once, but reading it walks every page map (milliseconds per process)."""
    members = [process, *process.children(recursive=True)]
    return _summed(members, lambda member: member.memory_full_info().pss)


def over_memory(process: psutil.Process, limit: int) -> bool:
    """Whether the process and its children hold more than `limit` bytes by PSS, read only when
    their RSS (never less than PSS) passes the limit: once a second, that is the cheap read."""
    return resident_memory(process) > limit and proportional_memory(process) > limit


def _summed(members: list[psutil.Process], size: Callable[[psutil.Process], int]) -> int:
    total = 0
    for member in members:
        with contextlib.suppress(psutil.Error):  # it ended meanwhile
            total += size(member)
    return total
