"""Noisy neighbours (issue 20, item 8): each attack by one team at full concurrency while a second
team lists its corpora, encodes and queues one job; the victim's read latency, its requests not
answered 2xx and its job's wait, as the README's table (goal: read p99 ≤ 250 ms, no failure, the
job started within one job slot).

Starts what the tests start (a fresh PostgreSQL database on 127.0.0.1:5432, a Redis server and
moto's S3 server of its own on free loopback ports), the neighbour stack on them
(tests/neighbours/stack.py: an API, a worker of concurrency 2 and a beat), two teams with a
corpus and a small trained version each, then runs each attack of tests/neighbours/attacks.py
in turn through the suite's harness, settling the stack between attacks (about 4 minutes on
2 cores; longer while attacks still win). Writes every figure to build/neighbours.json, and
the processes' logs to build/neighbours-logs/.

    .venv/bin/python -m benchmarks.noisy_neighbours
    .venv/bin/python -m benchmarks.noisy_neighbours --only bpe_corpus cost_report
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

from tests import services
from tests.neighbours import attacks, harness
from tests.neighbours.stack import fresh_key, neighbour_stack, prepare, settle
from tokenmill.db import make_engine, make_sessionmaker

BY_NAME = {make.__name__: make for make in attacks.ATTACKS}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=list(BY_NAME), help="only these attacks, in the usual order")
    parser.add_argument("--json", type=Path, default=services.REPO / "build" / "neighbours.json")
    parser.add_argument("--logs", type=Path, default=services.REPO / "build" / "neighbours-logs")
    args = parser.parse_args(argv)
    chosen = [make for make in attacks.ATTACKS if not args.only or make.__name__ in args.only]
    print(f"{len(chosen)} attack(s); load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    outcomes = []
    shutil.rmtree(args.logs, ignore_errors=True)
    args.logs.mkdir(parents=True)
    with services.run_settings() as settings:
        engine = make_engine(settings.database_url)
        sessionmaker = make_sessionmaker(engine)
        try:
            with neighbour_stack(settings, args.logs, tail=0) as stack:
                neighbours = prepare(stack, sessionmaker)
                for make in chosen:
                    attacker_key = fresh_key(sessionmaker, neighbours.attacker.id)
                    victim_key = fresh_key(sessionmaker, neighbours.victim.id)
                    outcome = harness.run(stack, make(neighbours), neighbours, attacker_key, victim_key)
                    outcomes.append(outcome)
                    print(harness.table([outcome]).splitlines()[-1], flush=True)
                    settle(stack, neighbours, attacker_key, victim_key)
        finally:
            engine.dispose()
    harness.write_results(outcomes, args.json)
    print(f"\n{harness.table(outcomes)}\n\n(every figure in {args.json})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
