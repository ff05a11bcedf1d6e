"""Evaluations on request (POST /v1/evaluations): a version or a reference, on chosen corpora.

The API side: submit, read. Queued like training, and ending the same ways
(tokenmill/queued_work/lifecycle.py): the API commits a run, a worker claims it (pipeline.py) and
writes one `Evaluation` row per corpus, tagged with the run, in one transaction with its
success. Nothing here imports the evaluation kernels.
"""

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tokenmill.corpora.rows import corpus_ids_or_all
from tokenmill.errors import InvalidInput, NotFound
from tokenmill.evaluation.references import BASELINES
from tokenmill.evaluation.reports import evaluation_out, premiums, subject_of
from tokenmill.models import Corpus, Evaluation, EvaluationRun, Team
from tokenmill.quotas import refuse_over, usage_of
from tokenmill.versions.registry import get_version


def submit_run(session: Session, team: Team, tokenizer: str | None, version: str | int | None,
               reference: str | None, corpora: list[str] | None, queued_limit: int | None = None,
               whole: bool = False) -> EvaluationRun:
    """A queued evaluation run, after checking the subject and the corpora exist, and the team's
    queued_jobs quota (`queued_limit`, counted over its evaluation runs); `whole` measures every
    document of each corpus rather than the seeded sample."""
    if queued_limit is not None:
        refuse_over("queued_jobs", queued_limit, usage_of(session, team.id).queued_evaluations,
                    what="queued evaluation runs", retry_after=60)
    if (tokenizer is None) == (reference is None):
        raise InvalidInput("give either 'tokenizer' (with 'version') or 'reference'", field="reference")
    version_id = None
    if reference is not None and reference not in BASELINES:
        raise InvalidInput(f"'reference' must be one of {', '.join(BASELINES)}", field="reference")
    if tokenizer is not None:
        try:
            version_id = get_version(session, team, tokenizer, version if version is not None else "latest").id
        except NotFound as exc:
            raise InvalidInput(exc.detail, field="version") from None
    ids = corpus_ids_or_all(session, team, corpora, "corpora")
    if not ids:
        raise InvalidInput("there are no corpora to evaluate on", field="corpora")
    run = EvaluationRun(team_id=team.id, version_id=version_id, reference=reference, corpus_ids=[str(i) for i in ids],
                        whole=whole)
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
            "version_id": str(run.version_id) if run.version_id else None, "corpora": run.corpus_ids, "whole": run.whole,
            "results": results, "created_at": run.created_at.isoformat(),
            "finished_at": run.finished_at.isoformat() if run.finished_at else None}
