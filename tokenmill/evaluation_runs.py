"""Evaluations on request (POST /v1/evaluations): a version or a reference, on chosen corpora.

Queued like training: the API commits a run, a worker claims it (queued → running) and
writes one `Evaluation` row per corpus, tagged with the run, in one transaction.
"""

import logging
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
from tokenmill.models import Corpus, Evaluation, EvaluationRun, Team, TokenizerVersion
from tokenmill.references import REFERENCE_NAMES
from tokenmill.reports import evaluation_out, premiums, subject_of
from tokenmill.store import ObjectStore
from tokenmill.versions import get_version, version_files

log = logging.getLogger(__name__)


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


def _claim(factory: sessionmaker[Session], run_id: uuid.UUID) -> bool:
    with transaction(factory) as session:
        result = session.execute(update(EvaluationRun).where(EvaluationRun.id == run_id, EvaluationRun.status == "queued")
                                 .values(status="running", updated_at=utcnow()))
    return result.rowcount == 1


def run_evaluation(factory: sessionmaker[Session], store: ObjectStore, run_id: uuid.UUID) -> str:
    """Worker side of a run: measure, then store every result and the status together."""
    if not _claim(factory, run_id):
        return "skipped"
    with factory() as session:
        run = session.get_one(EvaluationRun, run_id)
        corpora = existing_corpora(session, run.corpus_ids)
        version = session.get(TokenizerVersion, run.version_id) if run.version_id else None
    try:
        if version is not None:
            results = evaluate_version(store, version.name, version_files(store, version), corpora, lambda _: None)
        else:
            encoder = reference_encoder(str(run.reference))
            results = [(corpus, measure(encoder, corpus_documents(store, corpus))) for corpus in corpora]
        with transaction(factory) as session:
            session.add_all(evaluation_row(run.team_id, corpus, metrics, version_id=run.version_id,
                                           reference=run.reference, run_id=run.id) for corpus, metrics in results)
            session.execute(update(EvaluationRun).where(EvaluationRun.id == run_id)
                            .values(status="succeeded", finished_at=utcnow(), updated_at=utcnow()))
        return "succeeded"
    except Exception as exc:
        log.exception("evaluation run %s failed", run_id)
        with transaction(factory) as session:
            session.execute(update(EvaluationRun).where(EvaluationRun.id == run_id)
                            .values(status="failed", error=f"evaluation failed: {exc}"[:4000],
                                    finished_at=utcnow(), updated_at=utcnow()))
        return "failed"
