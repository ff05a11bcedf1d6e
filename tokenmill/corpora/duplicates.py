"""Exact-duplicate documents: the hashes a corpus's statistics keep, and the team's share across corpora.

The statistics pass (tokenmill.corpora.statistics_runs) counts a corpus's own duplicates and
stores the hashes of its distinct documents beside it, sorted little-endian uint64 under
`statistics/<team>/<corpus>.hashes` (8 bytes a distinct document): not under `corpora/`, whose
keys the reconciliation keeps only while a row names them by storage key. The object goes with its
corpus (tokenmill.corpora.rows.delete_corpus); one left behind, the reconciliation deletes once
its corpus row is gone (tokenmill.jobs.reconcile).

Across a team's corpora, a document is a duplicate when its exact text is an earlier document of
any of them, the same corpus or another: documents minus the distinct hashes of all of them,
merged from the stored arrays (the corpora are not read again). Only corpora whose statistics
counted duplicates take part; the others (statistics not ready, failed, or computed before
duplicates were counted) are left out and counted as such. The merge reads 8 bytes a distinct
document of each corpus: past `max_documents` in all it is not computed. Each process keeps the
last few answers, by the set of (corpus id, sha256) merged, and merges one team at a time, so
its memory holds at most one merge: at most about 12 bytes a hash (the array, its sort's scratch).

Deliberately not handled: near duplicates, and which documents or corpora the duplicates are.
"""

import threading
import uuid
from collections import OrderedDict
from collections.abc import Generator
from contextlib import closing
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from tokenmill.corpora.hashes import HASH_DTYPE
from tokenmill.models import Corpus
from tokenmill.store import CHUNK, ObjectNotFound, ObjectStore

KEPT_ANSWERS = 64  # merges remembered per process, by the set of corpora merged

_merging = threading.Lock()  # one merge at a time in a process: its memory holds at most one
_kept_lock = threading.Lock()
_kept: OrderedDict[frozenset[tuple[uuid.UUID, str]], int] = OrderedDict()  # corpora merged -> distinct hashes


def hashes_key(team_id: uuid.UUID, corpus_id: uuid.UUID) -> str:
    """Where the sorted hashes of a corpus's distinct documents are stored."""
    return f"statistics/{team_id}/{corpus_id}.hashes"


def store_hashes(store: ObjectStore, key: str, hashes: np.ndarray) -> None:
    """Store sorted hashes as little-endian uint64, a chunk at a time (no second copy of the array)."""
    data = hashes.astype(HASH_DTYPE, copy=False)
    step = CHUNK // data.itemsize
    store.put_stream(key, (data[start:start + step].tobytes() for start in range(0, len(data), step)))


@dataclass(frozen=True)
class HashedCorpus:
    """A corpus as the team's figure sees it; `distinct` None: its duplicates were not counted."""

    id: uuid.UUID
    key: str  # its hashes' (hashes_key)
    sha256: str
    documents: int
    distinct: int | None


@dataclass(frozen=True)
class TeamDuplicates:
    """Exact-duplicate documents across a team's corpora; the counts are None when not computed (`reason`)."""

    corpora: int  # whose duplicates were counted (and their hashes merged, when computed)
    corpora_left_out: int  # statistics not ready, failed, from before duplicates were counted, or hashes unreadable
    documents: int  # of the corpora merged
    duplicate_documents: int | None  # documents whose exact text is an earlier one's, in any of those corpora
    duplicate_share: float | None  # duplicate_documents / documents
    cross_corpus_duplicates: int | None  # of which not a duplicate within its own corpus: repeats another corpus's
    reason: str | None = None  # why the counts were not computed


def hashed_corpora(session: Session, team_id: uuid.UUID) -> list[HashedCorpus]:
    """The team's corpora, oldest first, with their distinct documents where their statistics counted them."""
    duplicates = Corpus.statistics["duplicate_documents"]
    rows = session.execute(select(Corpus.id, Corpus.sha256, Corpus.lines, duplicates)
                           .where(Corpus.team_id == team_id).order_by(Corpus.created_at)).all()
    return [HashedCorpus(id, hashes_key(team_id, id), sha256, lines, None if duplicate is None else lines - duplicate)
            for id, sha256, lines, duplicate in rows]


def team_duplicates(store: ObjectStore, corpora: list[HashedCorpus], max_documents: int) -> TeamDuplicates:
    """The exact-duplicate documents across these corpora, merged from their stored hashes (see the module)."""
    counted = [c for c in corpora if c.distinct is not None]
    hashes = sum(c.distinct or 0 for c in counted)
    if hashes > max_documents:
        return TeamDuplicates(len(counted), len(corpora) - len(counted), sum(c.documents for c in counted),
                              None, None, None, reason=f"the corpora hold {hashes:,} distinct documents, more than "
                              f"the {max_documents:,} this figure is computed for (TOKENMILL_DUPLICATES_MAX_DOCUMENTS)")
    distinct, merged = _distinct_across(store, counted)
    documents = sum(c.documents for c in merged)
    return TeamDuplicates(len(merged), len(corpora) - len(merged), documents, documents - distinct,
                          (documents - distinct) / documents if documents else 0.0,
                          sum(c.distinct or 0 for c in merged) - distinct)


def _distinct_across(store: ObjectStore, corpora: list[HashedCorpus]) -> tuple[int, list[HashedCorpus]]:
    """How many distinct hashes the corpora hold together, and the corpora whose hashes could be read."""
    key = frozenset((c.id, c.sha256) for c in corpora)
    if (kept := _kept_answer(key)) is not None:
        return kept, corpora
    with _merging:
        if (kept := _kept_answer(key)) is not None:  # merged meanwhile by the thread before
            return kept, corpora
        distinct, merged = _merge(store, corpora)
    if len(merged) == len(corpora):  # an unreadable object is tried again next time
        with _kept_lock:
            _kept[key] = distinct
            while len(_kept) > KEPT_ANSWERS:
                _kept.popitem(last=False)
    return distinct, merged


def _kept_answer(key: frozenset[tuple[uuid.UUID, str]]) -> int | None:
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
        return _kept.get(key)


def _merge(store: ObjectStore, corpora: list[HashedCorpus]) -> tuple[int, list[HashedCorpus]]:
    # Every corpus's hashes read into one array, sorted in place: timsort merges the sorted arrays.
    hashes = np.empty(sum(c.distinct or 0 for c in corpora), dtype=HASH_DTYPE)
    filled, merged = 0, list[HashedCorpus]()
    for corpus in corpora:
        end = filled + (corpus.distinct or 0)
        if _read_into(_chunks(store, corpus.key), hashes[filled:end]):
            filled, merged = end, [*merged, corpus]
    hashes = hashes[:filled]
    hashes.sort(kind="stable")
    return (int(np.count_nonzero(hashes[1:] != hashes[:-1])) + 1 if filled else 0), merged


def _chunks(store: ObjectStore, key: str) -> Generator[bytes, None, None]:
    """The object's chunks; none when it is missing (its corpus deleted meanwhile)."""
    try:
        yield from store.iter_chunks(key)
    except ObjectNotFound:
        return


def _read_into(chunks: Generator[bytes, None, None], into: np.ndarray) -> bool:
    """Fill `into` with the chunks; False unless they are exactly its size (missing or damaged)."""
    view, filled = into.view(np.uint8), 0
    with closing(chunks):
        for chunk in chunks:
            if filled + len(chunk) > len(view):
                return False
            view[filled:filled + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
            filled += len(chunk)
    return filled == len(view)
