"""The upkeep of all queued work, in a process of its own (`tokenmill beat`): the sweeper every
`sweep_interval` seconds and the reconciliation every ten of them.

It used to be Celery tasks on the workers' queue, so while every worker slot held a long job no
sweep ran, and a job whose worker died was never taken over. Here each pass has a thread of its
own (a long listing of the store never delays a sweep), and a pass that fails (the database or
the store away) is logged and tried again at the next tick.
"""

import logging
import threading
import time
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from tokenmill.jobs.reconcile import reconcile
from tokenmill.jobs.sweeper import Senders, sweep
from tokenmill.settings import Settings
from tokenmill.store import ObjectStore

log = logging.getLogger(__name__)

RECONCILE_EVERY = 10  # sweeps: listing the whole store is heavier


def keep_up(factory: sessionmaker[Session], store: ObjectStore, send: Senders, settings: Settings,
            stop: threading.Event) -> None:
    """Sweep and reconcile on their schedules, from now until `stop` is set."""
    passes = [
        threading.Thread(target=every, name="sweep", daemon=True,
                         args=(settings.sweep_interval, lambda: sweep(factory, store, send, settings), stop)),
        threading.Thread(target=every, name="reconcile", daemon=True,
                         args=(RECONCILE_EVERY * settings.sweep_interval,
                               lambda: reconcile(factory, store, settings.orphan_grace_seconds), stop)),
    ]
    for thread in passes:
        thread.start()
    for thread in passes:
        thread.join()


def every(seconds: float, work: Callable[[], dict[str, int]], stop: threading.Event) -> None:
    """Run `work` now and then every `seconds` (from start to start) until `stop` is set."""
    name = threading.current_thread().name
    while not stop.is_set():
        started = time.monotonic()
        try:
            done = work()
        except Exception:
            log.warning("%s failed; trying again in %.0f s", name, seconds, exc_info=True)
        else:
            if any(done.values()):
                log.info("%s: %s", name, done)
        stop.wait(max(0.0, seconds - (time.monotonic() - started)))
