"""The neighbour stack (stack.py), its two prepared teams, and `attempt`: run one attack against the
victim (harness.py), settle the stack afterwards, and keep the outcome for build/neighbours.json."""

import os

import pytest

from tests import services
from tests.neighbours import harness
from tests.neighbours.stack import fresh_key, neighbour_stack, prepare, settle
from tests.stack import settle_left_work

RESULTS = services.REPO / "build" / "neighbours.json"
OUTCOMES: list[harness.Outcome] = []
# The victim's read p99 a test accepts: generous, for a loaded CI machine. The goal (250 ms) is
# measured by benchmarks/noisy_neighbours.py on a quiet machine and reported, not asserted here.
P99_MS = float(os.environ.get("TOKENMILL_NEIGHBOUR_P99_MS", "1000"))
GIVE_UP_AFTER = 3  # the victim's job overtaken by this many of the attacker's: it waited more than a slot


# Package-scoped: its beat stops with these tests, so it never sends other suites' queued work.
@pytest.fixture(scope="package")
def noisy_stack(settings, tmp_path_factory):
    settle_left_work(settings.database_url)  # its beat would take over what other suites left silent
    with neighbour_stack(settings, tmp_path_factory.mktemp("neighbour-logs")) as running:
        yield running
    harness.write_results(OUTCOMES, RESULTS)


@pytest.fixture(scope="package")
def neighbours(noisy_stack, sessionmaker):
    return prepare(noisy_stack, sessionmaker)


@pytest.fixture
def attempt(noisy_stack, neighbours, sessionmaker):
    """Run an attack (made from the neighbours) with fresh keys for both teams; the stack is settled after."""
    keys = []

    def run(make_attack) -> harness.Outcome:
        keys.append((fresh_key(sessionmaker, neighbours.attacker.id), fresh_key(sessionmaker, neighbours.victim.id)))
        outcome = harness.run(noisy_stack, make_attack(neighbours), neighbours, *keys[-1], GIVE_UP_AFTER)
        OUTCOMES.append(outcome)
        print(harness.table([outcome]))
        return outcome

    yield run
    for attacker_key, victim_key in keys:
        settle(noisy_stack, neighbours, attacker_key, victim_key)


def broken_goals(outcome: harness.Outcome) -> list[str]:
    """The goals the victim did not get: every request 2xx, read p99 within P99_MS, its job started
    within one job slot; and the attacker answered by a bound (4xx), never a 5xx or no answer."""
    broken = [f"victim request not answered 2xx: {failure}" for failure in outcome.victim_failures]
    if outcome.reads.n == 0 or outcome.reads.p99_ms > P99_MS:
        broken.append(f"victim read p99 {outcome.reads.p99_ms} ms > {P99_MS:g} ms ({outcome.reads})")
    if outcome.job_wait_s is None:
        broken.append(f"victim job not started ({outcome.slots_waited} of the attacker's jobs started first; "
                      f"waited for at most {GIVE_UP_AFTER} of them or {harness.JOB_START_SECONDS:g} s)")
    elif outcome.slots_waited is None or outcome.slots_waited > 1:
        broken.append(f"victim job waited {outcome.job_wait_s} s, {outcome.slots_waited} of the attacker's jobs "
                      "started first: more than one slot")
    unbounded = {status: n for status, n in outcome.attacker.items() if not status.startswith(("2", "3", "4"))}
    if unbounded:
        broken.append(f"attacker answered outside a bound (5xx or no answer): {unbounded}")
    return broken
