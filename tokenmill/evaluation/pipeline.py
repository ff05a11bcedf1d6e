"""An evaluation run, worker side: claim, measure a version or a reference, store the results.

The results and the run's success are written in one transaction, fenced by the attempt
(tokenmill/work/lifecycle.py), so a run taken over by the sweeper never gets two sets of results.
"""

import uuid
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.reading import corpus_documents
from tokenmill.corpora.rows import existing_corpora
from tokenmill.db import rowcount, transaction, utcnow
from tokenmill.evaluation.encoders import encoding_threads, reference_encoder
from tokenmill.evaluation.measuring import evaluate_version, evaluation_row, measure
from tokenmill.evaluation.reports import has_version_curve
from tokenmill.models import Corpus, EvaluationRun, Status, TokenizerVersion
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import version_files
from tokenmill.work.lifecycle import Claim, WorkLimits, claim, fail, held, run_claimed


def run_evaluation(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID,
                   limits: WorkLimits = WorkLimits()) -> str:
    """Worker side of a run: measure, then store every result and the status together."""
    outcome = claim(factory, EvaluationRun, run_id, limits)
    if outcome is not Claim.CLAIMED:
        return outcome.value  # type: ignore[no-any-return]  # mypy: Any for .value of a narrowed Claim
    with factory() as session:
        run = session.get_one(EvaluationRun, run_id)
        corpora = existing_corpora(session, run.corpus_ids)
        version = session.get(TokenizerVersion, run.version_id) if run.version_id else None
        # The vocabulary-size curve is measured once per version: by this run only if none has been.
        curve = version is not None and not has_version_curve(session, version.id)

    def work() -> str:
        results = _measure(store, run, version, corpora, curve)
        with transaction(factory) as session:
            finished = rowcount(session.execute(
                update(EvaluationRun).where(held(EvaluationRun, run_id, run.attempts))
                .values(status=Status.SUCCEEDED, finished_at=utcnow(), updated_at=utcnow())))
            if not finished:
                return "skipped"  # the sweeper took it for dead meanwhile: its results are not ours to write
            session.add_all(evaluation_row(run.team_id, corpus, metrics, version_id=run.version_id,
                                           reference=run.reference, run_id=run.id) for corpus, metrics in results)
        return Status.SUCCEEDED

    # An evaluation run writes nothing to the store: there is nothing to discard.
    return run_claimed(factory, EvaluationRun, run_id, run.attempts, limits, work, lambda: None, "evaluation")


def _measure(store: ObjectStore, run: EvaluationRun, version: TokenizerVersion | None,
             corpora: list[Corpus], curve: bool) -> list[tuple[Corpus, dict[str, Any]]]:
    if version is not None:
        return evaluate_version(store, version.name, version_files(store, version), corpora, lambda _: None, curve=curve)
    encoder = reference_encoder(str(run.reference))
    with encoding_threads():
        return [(corpus, measure(encoder, corpus_documents(store, corpus))) for corpus in corpora]


def abandon_run(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID, message: str) -> None:
    """Fail a run whose worker was killed (hard time limit); it wrote nothing to the store."""
    fail(factory, EvaluationRun, run_id, message)
