"""Stage and progress of a running job, written to its row; also how a worker learns of a cancel."""

import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Protocol

import psutil
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.allocator import give_back_memory
from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.errors import JobCancelled
from tokenmill.models import TrainingJob
from tokenmill.queued_work.heartbeat import rss
from tokenmill.queued_work.lifecycle import running_in


class Report(Protocol):
    """Where stage and progress go: a Reporter (or a stand-in for one)."""

    def __call__(self, stage: str, progress: float, force: bool = False) -> None: ...


class Reporter:
    """Writes stage and progress of a running job at most once a second. Progress never goes
    back within an attempt: a stage that starts below where the last one ended is shown where
    that one ended (a retry is a new attempt, and starts again from 0)."""

    def __init__(self, factory: sessionmaker[Session], job_id: uuid.UUID, attempt: int | None = None,
                 interval: float = 1.0) -> None:
        self.factory = factory
        self.job_id = job_id
        self.attempt = attempt
        self.interval = interval
        self._last = 0.0
        self.highest = 0.0

    def __call__(self, stage: str, progress: float, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        self.highest = max(self.highest, min(max(progress, 0.0), 1.0))
        with transaction(self.factory) as session:
            result = session.execute(
                update(TrainingJob)
                .where(running_in(TrainingJob, self.job_id, self.attempt))
                .values(stage=stage, progress=round(self.highest, 4), updated_at=utcnow())
            )
        if rowcount(result) == 0:
            raise JobCancelled(str(self.job_id))


def tracked(texts: Iterable[str], total_chars: int, report: Report, stage: str, start: float, end: float) -> Iterator[str]:
    """The texts, reporting the share read so far as progress between start and end, at each
    thousandth of the total (not on every text: a corpus has millions). A report is also where
    a cancel is noticed: within a thousandth of the pass."""
    seen, step = 0, max(total_chars // 1000, 1)
    due = step
    for text in texts:
        seen += len(text)
        if seen >= due:
            report(stage, start + (end - start) * seen / max(total_chars, 1))
            due = seen + step
        yield text


class PeakMemory:
    """Samples the resident memory of this process and the children it starts meanwhile (a
    training child) in a thread; `peak` is the highest seen. Children already running when it
    starts (the evaluation's encode processes, kept between jobs) are not counted. Finding the
    children reads every process of the machine, so it is done once a second; their memory,
    like this process's, is read every `every` seconds.

    Memory freed before it starts and after it ends goes back to the system (`give_back_memory`),
    so what an earlier job freed but the allocator kept is not counted in this one; what a child
    still holds after a task (more than TOKENMILL_WORKER_KEEP_MEMORY_BYTES) ends the child, and
    the next job starts in a fresh one (workers/app.py)."""

    def __init__(self, every: float = 0.1, look_for_children_every: float = 1.0) -> None:
        self.every = every
        self.look_every = max(1, round(look_for_children_every / every))
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="peak-memory")
        self._process = psutil.Process()
        self._before: set[int] = set()
        self._children: list[psutil.Process] = []

    def _look_for_children(self) -> None:
        self._children = [child for child in self._process.children(recursive=True) if child.pid not in self._before]

    def _sample(self) -> None:
        self.peak = max(self.peak, rss([self._process, *self._children]))

    def _run(self) -> None:
        samples = 0
        while not self._stop.is_set():
            if samples % self.look_every == 0:
                self._look_for_children()
            self._sample()
            samples += 1
            self._stop.wait(self.every)

    def __enter__(self) -> "PeakMemory":
        give_back_memory()
        self._before = {child.pid for child in self._process.children(recursive=True)}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._look_for_children()
        self._sample()
        give_back_memory()
