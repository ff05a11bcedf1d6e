"""Training jobs as the API sees them: submit (idempotent), read, list, cancel.

The row is the truth; the queue only carries its id. The caller commits, then enqueues.
An `Idempotency-Key` names one request: the job keeps the SHA-256 of the request that made
it, and the same key with a different request is refused (422) rather than answered with a
job that is not what was asked for.
"""

import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tokenmill.corpora.rows import corpus_ids_or_all, named_corpora, parse_ids
from tokenmill.db import rowcount, utcnow
from tokenmill.errors import Conflict, InvalidInput, NotFound
from tokenmill.models import FINISHED, UNFINISHED, Corpus, Status, Team, TokenizerVersion, TrainingJob
from tokenmill.pagination import Page, paginate
from tokenmill.quotas import refuse_over, usage_of
from tokenmill.training.mixtures import weights_refusal
from tokenmill.training.spec import resolve_spec
from tokenmill.versions.registry import NOTED_LINEAGE

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
IDEMPOTENCY_FIELD = "Idempotency-Key"


def check_tokenizer_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise InvalidInput(
            "'tokenizer' must be 1-100 characters of letters, digits, '.', '_' or '-', starting with a letter or digit",
            field="tokenizer",
        )
    return name


def submit_job(
    session: Session,
    team: Team,
    tokenizer: str,
    spec: dict[str, Any],
    train_corpora: Sequence[str],
    eval_corpora: Sequence[str] | None,
    idempotency_key: str | None = None,
    queued_limit: int | None = None,
) -> tuple[TrainingJob, bool]:
    """A queued job (and True), or the job this Idempotency-Key already made for the same request (and False).
    `queued_limit`: the team's queued_jobs quota (tokenmill.quotas); a replay is answered whatever it is."""
    fingerprint = request_sha256(tokenizer, spec, train_corpora, eval_corpora)
    if idempotency_key:
        existing = _by_idempotency_key(session, team, idempotency_key)
        if existing is not None:
            return _replayed(existing, fingerprint), False
    if queued_limit is not None:
        refuse_over("queued_jobs", queued_limit, usage_of(session, team.id).queued_jobs, what="queued jobs",
                    retry_after=60)
    check_tokenizer_name(tokenizer)
    resolved = resolve_spec(spec if isinstance(spec, dict) else {}, owner=str(team.id))
    if resolved.base is not None:
        from tokenmill.jobs.extension import checked_base  # here: the learner it imports is no API's business

        resolved = checked_base(session, team, resolved)
    if not train_corpora:
        raise InvalidInput("'train_corpora' must name at least one corpus", field="train_corpora")
    train = named_corpora(session, team, parse_ids(train_corpora, "train_corpora"), "train_corpora")
    if resolved.parity:
        check_parallel(train)
    if resolved.mixture is not None and (why := weights_refusal(resolved.mixture, list(train))):
        raise InvalidInput(f"spec.mixture: {why}", field="spec.mixture")
    evaluate = corpus_ids_or_all(session, team, eval_corpora, "eval_corpora")
    job = TrainingJob(
        team_id=team.id,
        tokenizer=tokenizer,
        spec=resolved.model_dump(),
        train_corpus_ids=[str(c.id) for c in train],
        eval_corpus_ids=[str(i) for i in evaluate],
        idempotency_key=idempotency_key,
        request_sha256=fingerprint,
    )
    try:
        with session.begin_nested():
            session.add(job)
    except IntegrityError:
        # Another request with the same key won the race: answer with its job.
        existing = _by_idempotency_key(session, team, idempotency_key or "")
        if existing is None:
            raise
        return _replayed(existing, fingerprint), False
    return job, True


def check_parallel(corpora: Sequence[Corpus]) -> None:
    """Parity-aware training needs one parallel group in two or more languages (its dev set)."""
    groups = {c.parallel_group for c in corpora}
    languages = {c.language for c in corpora}
    if len(groups) != 1 or None in groups or len(languages) < 2:
        raise InvalidInput("spec.parity needs training corpora of one parallel_group in two or more languages "
                           "(their first lines, line-aligned, are the parallel dev set)", field="train_corpora")


def request_sha256(tokenizer: str, spec: dict[str, Any], train_corpora: Sequence[str],
                   eval_corpora: Sequence[str] | None) -> str:
    """The SHA-256 of a submission as posted (canonical JSON: sorted keys, no spaces)."""
    canonical = json.dumps(
        {"tokenizer": tokenizer, "spec": spec, "train_corpora": list(train_corpora),
         "eval_corpora": None if eval_corpora is None else list(eval_corpora)},
        sort_keys=True, separators=(",", ":"), default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()  # ensure_ascii: always ASCII


def _replayed(existing: TrainingJob, fingerprint: str) -> TrainingJob:
    # Jobs from before fingerprints were kept (NULL) are answered as they always were.
    if existing.request_sha256 not in (None, fingerprint):
        raise InvalidInput(f"this {IDEMPOTENCY_FIELD} was already used for a different request: "
                           "send the same request to get its job, or a new key for a new job", field=IDEMPOTENCY_FIELD)
    return existing


def _by_idempotency_key(session: Session, team: Team, key: str) -> TrainingJob | None:
    return session.scalar(
        select(TrainingJob).where(TrainingJob.team_id == team.id, TrainingJob.idempotency_key == key)
    )


def get_job(session: Session, team: Team, job_id: uuid.UUID | str) -> TrainingJob:
    """The team's job, or 404 (also for another team's id)."""
    try:
        key = uuid.UUID(str(job_id))
    except ValueError:
        raise NotFound(f"no job {job_id}") from None
    job = session.get(TrainingJob, key)
    if job is None or job.team_id != team.id:
        raise NotFound(f"no job {job_id}")
    return job


def list_jobs(session: Session, team: Team, page: Page, status: str | None = None) -> tuple[list[TrainingJob], int]:
    query = select(TrainingJob).where(TrainingJob.team_id == team.id)
    if status:
        query = query.where(TrainingJob.status == status)
    return paginate(session, query.order_by(TrainingJob.created_at.desc()), page)


def version_outcomes(session: Session, jobs: Sequence[TrainingJob]) -> dict[uuid.UUID, tuple[int, dict[str, Any]]]:
    """The vocabulary size each succeeded job's version reached, and the parts of its lineage
    its notes read (NOTED_LINEAGE), by job id: one query for a page of jobs.

    The job keeps what it asked for (spec.vocab_size); its version, what training reached."""
    ids = [job.id for job in jobs if job.status == Status.SUCCEEDED]
    if not ids:
        return {}
    rows = session.execute(select(TokenizerVersion.job_id, TokenizerVersion.vocab_size,
                                  *(TokenizerVersion.lineage[key] for key in NOTED_LINEAGE))
                           .where(TokenizerVersion.job_id.in_(ids)))
    return {job_id: (size, dict(zip(NOTED_LINEAGE, noted))) for job_id, size, *noted in rows if job_id is not None}


def cancel_job(session: Session, team: Team, job_id: uuid.UUID | str) -> TrainingJob:
    """Cancel a queued or running job; a running worker notices at its next progress report."""
    job = get_job(session, team, job_id)
    result = session.execute(
        update(TrainingJob)
        .where(TrainingJob.id == job.id, TrainingJob.status.in_(UNFINISHED))
        .values(status=Status.CANCELLED, stage="cancelled", finished_at=utcnow(), updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    session.refresh(job)
    if rowcount(result) == 0 and job.status in FINISHED and job.status != Status.CANCELLED:
        raise Conflict(f"job {job.id} has already {job.status}")
    return job
