"""Each attack, by one team at full concurrency, leaves the other team its service: every request
answered 2xx, reads fast (p99 within TOKENMILL_NEIGHBOUR_P99_MS), its job started within one job
slot; and the attacker is answered by a bound (a 4xx of a quota or a limit), never a 5xx."""

from tests.neighbours import attacks
from tests.neighbours.conftest import broken_goals


def refused(outcome, *statuses: str) -> list[str]:
    """The goal that the attacker met one of these answers (a quota's, a limit's)."""
    if any(outcome.attacker.get(status) for status in statuses):
        return []
    return [f"the attacker was never answered {' or '.join(statuses)}: {outcome.attacker}"]


def held_the_worker(outcome, jobs: int) -> list[str]:
    """The check that the attack was one: that many of the attacker's jobs were ahead of the victim's."""
    if (outcome.jobs_ahead or 0) >= jobs:
        return []
    return [f"only {outcome.jobs_ahead} of the attacker's jobs were ahead of the victim's (the attack needs {jobs})"]


def test_compiling_a_huge_regex_at_submission(attempt):
    outcome = attempt(attacks.compiled_regex)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_compiling_a_nested_huge_regex_at_submission(attempt):
    outcome = attempt(attacks.compiled_nested_regex)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_replaying_a_version_whose_regex_backtracks_on_the_sample(attempt):
    outcome = attempt(attacks.version_replay)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_bpe_steps_on_the_largest_corpus(attempt):
    outcome = attempt(attacks.bpe_corpus)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_forty_dashboard_uploads_of_a_zstd_bomb(attempt):
    outcome = attempt(attacks.dashboard_uploads)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_eight_api_uploads_of_a_zstd_bomb(attempt):
    outcome = attempt(attacks.api_uploads)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_the_cost_report_in_a_loop(attempt):
    outcome = attempt(attacks.cost_report)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_the_teams_duplicates_in_a_loop(attempt):
    outcome = attempt(attacks.duplicates)
    assert not broken_goals(outcome), "\n".join(broken_goals(outcome))


def test_more_connections_than_the_api_has_threads_and_database_connections(attempt):
    outcome = attempt(attacks.metadata_flood)
    problems = broken_goals(outcome)
    if not outcome.attacker.get("200"):
        problems.append(f"the flood was never answered: {outcome.attacker}")
    assert not problems, "\n".join(problems)


def test_twenty_queued_jobs_then_the_victims(attempt):
    outcome = attempt(attacks.queued_jobs)
    problems = broken_goals(outcome) + held_the_worker(outcome, attacks.QUEUED_JOBS // 2)
    assert not problems, "\n".join(problems)


def test_a_bomb_past_the_storage_quota_is_refused(attempt):
    outcome = attempt(attacks.storage_bomb)
    problems = broken_goals(outcome) + refused(outcome, "409", "413")
    if outcome.attacker.get("201"):
        problems.append(f"the 512 MiB corpus was stored past the 256 MiB storage quota: {outcome.attacker}")
    assert not problems, "\n".join(problems)


def test_the_rate_limit_and_the_queued_jobs_quota_answer_the_flood(attempt):
    outcome = attempt(attacks.quotas)
    problems = (broken_goals(outcome) + refused(outcome, "429") + refused(outcome, "409")
                + held_the_worker(outcome, attacks.QUEUED_JOBS // 2))
    assert not problems, "\n".join(problems)


def test_cancelling_jobs_stuck_in_their_regex_frees_their_slots(attempt):
    outcome = attempt(attacks.cancelled_backtracking)
    problems = broken_goals(outcome) + held_the_worker(outcome, attacks.STUCK_JOBS)
    if outcome.attacker.get("200", 0) < attacks.STUCK_JOBS:  # the cancels
        problems.append(f"the cancels were not all answered 200: {outcome.attacker}")
    assert not problems, "\n".join(problems)


def test_whole_corpus_evaluations_spread_over_the_worker(attempt):
    outcome = attempt(attacks.whole_evaluations)
    problems = broken_goals(outcome) + refused(outcome, "409", "429")
    if not outcome.attacker.get("202"):
        problems.append(f"no evaluation run was queued: {outcome.attacker}")
    assert not problems, "\n".join(problems)
