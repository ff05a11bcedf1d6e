"""A parity-aware version beside its plain twin, so its premium is read against something.

Parity-aware BPE gives merges to the languages that compress worst: their premium falls, and
the pivot's tokens usually rise. A premium alone hides that. The version page shows the twin
trained the other way (same vocabulary size asked, same algorithm and library, same training
corpora), per language of the training group: tokens and premium of each, side by side. Without
a twin it offers to train one (the new-job form, filled in: `twin_form_query`).
"""

import uuid
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from tokenmill.evaluation.reports import version_evaluations
from tokenmill.models import Corpus, Team, TokenizerVersion

SAME = ("vocab_size", "algorithm", "library")


def training_corpus_ids(row: TokenizerVersion) -> list[str]:
    return sorted(str(c["id"]) for c in row.lineage.get("corpora", []))


def twin(session: Session, team: Team, row: TokenizerVersion) -> TokenizerVersion | None:
    """The newest version of the team trained as `row` was, with parity the other way, if any."""
    corpora, parity = training_corpus_ids(row), bool(row.spec.get("parity"))
    query = (select(TokenizerVersion).where(TokenizerVersion.team_id == team.id, TokenizerVersion.id != row.id)
             .order_by(TokenizerVersion.created_at.desc()))
    for other in session.scalars(query):
        if (bool(other.spec.get("parity")) != parity and training_corpus_ids(other) == corpora
                and all(other.spec.get(key) == row.spec.get(key) for key in SAME)):
            return other
    return None


def parallel_group(session: Session, team: Team, row: TokenizerVersion) -> str | None:
    """The one parallel group of a version's training corpora in two or more languages (what parity trains on)."""
    ids = training_corpus_ids(row)
    if not ids:
        return None
    wanted = [uuid.UUID(c) for c in ids if _is_uuid(c)]
    corpora = list(session.scalars(select(Corpus).where(Corpus.team_id == team.id, Corpus.id.in_(wanted))))
    groups = {c.parallel_group for c in corpora}
    if len(corpora) != len(ids) or len(groups) != 1 or None in groups or len({c.language for c in corpora}) < 2:
        return None
    return corpora[0].parallel_group


def side_by_side(session: Session, team: Team, row: TokenizerVersion, other: TokenizerVersion,
                 group: str) -> list[dict[str, Any]]:
    """Per language of the group: this version's and the twin's tokens and premium (None where not measured)."""
    mine = {e["corpus_id"]: e for e in version_evaluations(session, team, row) if e["parallel_group"] == group}
    theirs = {e["corpus_id"]: e for e in version_evaluations(session, team, other) if e["parallel_group"] == group}
    rows = []
    for corpus_id, evaluation in sorted(mine.items(), key=lambda item: item[1]["language"]):
        twin_metrics = theirs.get(corpus_id, {}).get("metrics", {})
        tokens, twin_tokens = evaluation["metrics"]["tokens"], twin_metrics.get("tokens")
        rows.append({"language": evaluation["language"], "corpus": evaluation["corpus"],
                     "tokens": tokens, "premium": evaluation["metrics"].get("premium"),
                     "twin_tokens": twin_tokens, "twin_premium": twin_metrics.get("premium"),
                     "change": (tokens / twin_tokens - 1) if twin_tokens else None})
    return rows


def twin_form_query(row: TokenizerVersion) -> str:
    """The new-job form's query that fills it in for the twin of `row` (parity the other way)."""
    parity = not row.spec.get("parity")
    name = f"{row.name}-{'parity' if parity else 'plain'}"
    return urlencode({"like": f"{row.name}@{row.version}", "parity": "true" if parity else "false", "tokenizer": name})


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True
