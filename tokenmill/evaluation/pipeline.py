"""An evaluation run, worker side: claim, measure a version or a reference, store the results.

The results and the run's success are written in one transaction, fenced by the attempt
(tokenmill/queued_work/lifecycle.py), so a run taken over by the sweeper never gets two sets of results.
A task message starts the fair next run of any team (tokenmill/queued_work/scheduling.py), or takes
over its own run if that one has fallen silent.
"""

import uuid
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.rows import existing_corpora
from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.evaluation.encoders import encoding_threads, reference_encoder
from tokenmill.evaluation.measuring import evaluate_version, evaluation_row, measure_corpus
from tokenmill.evaluation.parts import MeasureHelpers, Spread, discard_spread, run_owner, run_prefix
from tokenmill.evaluation.reports import has_version_curve
from tokenmill.models import Corpus, EvaluationRun, Status, TokenizerVersion
from tokenmill.queued_work.lifecycle import (
    Claim,
    claim,
    claim_in_turn,
    fail,
    latest_claim,
    run_claimed,
    running_in,
)
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.scheduling import EVALUATION, Wake, wake_team_of
from tokenmill.store import ObjectStore, delete_now_or_later
from tokenmill.versions.registry import version_files


def run_next_evaluation(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID, limits: WorkLimits,
                        claimant: str | None = None, wake: Wake | None = None,
                        helpers: MeasureHelpers = MeasureHelpers()) -> str:
    """What a task message for `run_id` does: take that run over if it fell silent, else start the
    fair next run of any team; returns the status of the run it ran, or "idle". When the run
    ends and its team has queued runs, `wake` sends a message for the oldest of them."""
    started = claim_in_turn(factory, EVALUATION, run_id, limits, claimant)
    if started is None:
        return "idle"
    status = _run(factory, store, started, limits, helpers)
    if wake is not None:
        wake_team_of(factory, EVALUATION, started, wake)
    return status


def run_evaluation(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID,
                   limits: WorkLimits = WorkLimits(), helpers: MeasureHelpers = MeasureHelpers()) -> str:
    """Worker side of this run, whatever the turn: measure, then store every result and the status together."""
    outcome = claim(factory, EvaluationRun, run_id, limits)
    if outcome is not Claim.CLAIMED:
        return outcome.value  # type: ignore[no-any-return]  # mypy: Any for .value of a narrowed Claim
    return _run(factory, store, run_id, limits, helpers)


def _run(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID, limits: WorkLimits,
         helpers: MeasureHelpers) -> str:
    # A claimed run, to its end.
    with factory() as session:
        run = session.get_one(EvaluationRun, run_id)
        corpora = existing_corpora(session, run.corpus_ids)
        version = session.get(TokenizerVersion, run.version_id) if run.version_id else None
        # The vocabulary-size curve is measured once per version: by this run only if none has been.
        curve = version is not None and not has_version_curve(session, version.id)

    spread = Spread(factory, run_owner(run_id, run.attempts), limits, helpers)

    def work() -> str:
        results = _measure(store, run, version, corpora, curve, spread)
        with transaction(factory) as session:
            finished = rowcount(session.execute(
                update(EvaluationRun).where(running_in(EvaluationRun, run_id, run.attempts))
                .values(status=Status.SUCCEEDED, finished_at=utcnow(), updated_at=utcnow())))
            if not finished:
                return "skipped"  # the sweeper took it for dead meanwhile: its results are not ours to write
            session.add_all(evaluation_row(run.team_id, corpus, metrics, version_id=run.version_id,
                                           reference=run.reference, run_id=run.id) for corpus, metrics in results)
        return Status.SUCCEEDED

    # What a run writes to the store is the sums of a corpus measured in parts.
    return run_claimed(factory, EvaluationRun, run_id, run.attempts, limits, work,
                       lambda: discard_spread(store, spread.owner), "evaluation")


def _measure(store: ObjectStore, run: EvaluationRun, version: TokenizerVersion | None,
             corpora: list[Corpus], curve: bool, spread: Spread) -> list[tuple[Corpus, dict[str, Any]]]:
    if version is not None:
        return evaluate_version(store, version.name, version_files(store, version), corpora, lambda _: None,
                                curve=curve, spread=spread, whole=run.whole)
    encoder = reference_encoder(str(run.reference))
    with encoding_threads():
        return [(corpus, measure_corpus(encoder, store, corpus, spread=spread, whole=run.whole)) for corpus in corpora]


def abandon_run(factory: sessionmaker[Session], store: ObjectStore, claimant: str, message: str) -> None:
    """Fail the run a killed worker process was running (hard time limit), found by the task that
    claimed it, and delete what it wrote to the store (a corpus measured in parts)."""
    if (run_id := latest_claim(factory, EvaluationRun, claimant)) is not None:
        fail(factory, EvaluationRun, run_id, message)
        delete_now_or_later(store.delete_prefix, run_prefix(run_id))
