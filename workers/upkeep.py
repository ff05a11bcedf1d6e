"""`tokenmill beat`: the upkeep process. It sweeps and reconciles on its own schedule
(tokenmill/jobs/upkeep.py) and sends the tasks it finds lost, so upkeep never waits behind
training on a worker's slots. One per installation, beside the workers."""

import logging
import signal
import threading

from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.jobs.sweeper import Senders
from tokenmill.jobs.upkeep import RECONCILE_EVERY, keep_up
from tokenmill.settings import get_settings
from tokenmill.store import open_store
from workers.tasks import corpus_statistics, evaluate, sender, train


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s: %(levelname)s/upkeep] %(message)s")
    settings = get_settings()
    engine = make_engine(settings.database_url)
    store = open_store(settings.storage_url, settings.s3_endpoint_url)
    senders = Senders(train=sender(train, "job_id"), evaluate=sender(evaluate, "run_id"),
                      statistics=sender(corpus_statistics, "corpus_id"))
    stop = threading.Event()
    for stopping in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stopping, lambda *_: stop.set())
    logging.getLogger(__name__).info("upkeep: a sweep every %.0f s, a reconciliation every %.0f s",
                                     settings.sweep_interval, RECONCILE_EVERY * settings.sweep_interval)
    try:
        keep_up(make_sessionmaker(engine), store, senders, settings, stop)
    finally:
        engine.dispose()


if __name__ == "__main__":
    main()
