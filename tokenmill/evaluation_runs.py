"""Evaluations on request (POST /v1/evaluations): a version or a reference, on chosen corpora.

Queued like training, and ending the same ways (lifecycle.py): the API commits a run, a
worker claims it (queued → running) and writes one `Evaluation` row per corpus, tagged with
the run, in one transaction with its success.
"""

import uuid
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction, utcnow
from tokenmill.encoders import reference_encoder
from tokenmill.errors import InvalidInput, NotFound
from tokenmill.corpora import corpus_documents
from tokenmill.evaluation import evaluate_version, evaluation_row, measure
from tokenmill.jobs import corpus_ids_or_all, existing_corpora
from tokenmill.lifecycle import Claim, WorkLimits, claim, fail, held, run_claimed
from tokenmill.models import Corpus, Evaluation, EvaluationRun, Team, TokenizerVersion
from tokenmill.references import REFERENCE_NAMES
from tokenmill.reports import evaluation_out, premiums, subject_of
from tokenmill.store import ObjectStore
from tokenmill.versions import get_version, version_files



def submit_run(session: Session, team: Team, tokenizer: str | None, version: str | int | None,
               reference: str | None, corpora: list[str] | None) -> EvaluationRun:
    """A queued evaluation run, after checking the subject and the corpora exist."""
    if (tokenizer is None) == (reference is None):
        raise InvalidInput("give either 'tokenizer' (with 'version') or 'reference'", field="reference")
    version_id = None
    if reference is not None and reference not in REFERENCE_NAMES:
        raise InvalidInput(f"'reference' must be one of {', '.join(REFERENCE_NAMES)}", field="reference")
    if tokenizer is not None:
        try:
            version_id = get_version(session, team, tokenizer, version if version is not None else "latest").id
        except NotFound as exc:
            raise InvalidInput(exc.detail, field="version") from None
    ids = corpus_ids_or_all(session, team, corpora, "corpora")
    if not ids:
        raise InvalidInput("there are no corpora to evaluate on", field="corpora")
    run = EvaluationRun(team_id=team.id, version_id=version_id, reference=reference, corpus_ids=[str(i) for i in ids])
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, team: Team, run_id: uuid.UUID) -> EvaluationRun:
    run = session.get(EvaluationRun, run_id)
    if run is None or run.team_id != team.id:
        raise NotFound(f"no evaluation {run_id}")
    return run


def run_out(session: Session, run: EvaluationRun) -> dict[str, Any]:
    """A run with its results (premium included where the run measured the pivot too)."""
    pairs = [(e, c) for e, c in session.execute(
        select(Evaluation, Corpus).join(Corpus, Corpus.id == Evaluation.corpus_id).where(Evaluation.run_id == run.id))]
    extra = premiums(pairs)
    results = [evaluation_out(e, c, extra.get((subject_of(e), c.id))) for e, c in pairs]
    return {"id": str(run.id), "status": run.status, "error": run.error, "reference": run.reference,
            "version_id": str(run.version_id) if run.version_id else None, "corpora": run.corpus_ids,
            "results": results, "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}


def run_evaluation(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID,
                   limits: WorkLimits = WorkLimits()) -> str:
    """Worker side of a run: measure, then store every result and the status together."""
    outcome = claim(factory, EvaluationRun, run_id, limits)
    if outcome is not Claim.CLAIMED:
        return outcome.value
    with factory() as session:
        run = session.get_one(EvaluationRun, run_id)
        corpora = existing_corpora(session, run.corpus_ids)
        version = session.get(TokenizerVersion, run.version_id) if run.version_id else None

    def work() -> str:
        results = _measure(store, run, version, corpora)
        with transaction(factory) as session:
            finished = session.execute(
                update(EvaluationRun).where(held(EvaluationRun, run_id, run.attempts))
                .values(status="succeeded", finished_at=utcnow(), updated_at=utcnow())).rowcount
            if not finished:
                return "skipped"  # the sweeper took it for dead meanwhile: its results are not ours to write
            session.add_all(evaluation_row(run.team_id, corpus, metrics, version_id=run.version_id,
                                           reference=run.reference, run_id=run.id) for corpus, metrics in results)
        return "succeeded"

    # An evaluation run writes nothing to the store: there is nothing to discard.
    return run_claimed(factory, EvaluationRun, run_id, run.attempts, limits, work, lambda: None, "evaluation")


def _measure(store: ObjectStore, run: EvaluationRun, version: TokenizerVersion | None,
             corpora: list[Corpus]) -> list[tuple[Corpus, dict[str, Any]]]:
    if version is not None:
        return evaluate_version(store, version.name, version_files(store, version), corpora, lambda _: None)
    encoder = reference_encoder(str(run.reference))
    return [(corpus, measure(encoder, corpus_documents(store, corpus))) for corpus in corpora]


def abandon_run(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID, message: str) -> None:
    """Fail a run whose worker was killed (hard time limit); it wrote nothing to the store."""
    fail(factory, EvaluationRun, run_id, message)
