"""Training from counts gathered on many workers (`counting: distributed` in the spec).

The job's own worker (the coordinator) cuts its corpora into byte ranges (one `count_parts`
row each, for this attempt), sends helper tasks on the broker (a Celery group: any number of
workers, on any number of machines), and then counts parts itself like any helper: each
worker claims a part, pre-tokenizes and counts the lines it owns, and spills the counts to the
store under the job's prefix. Once every part is counted, the coordinator merges the spills in
one streaming pass (leaving out pieces seen fewer than `min_frequency` times in all) and learns
from the merged counts: byte-level BPE merges by rustbpe's rule (tokenmill.training.merge_learner), or a
sentencepiece model through its `input_format: tsv` (word, count). No worker ever holds more
than one part's counts, and the coordinator only the merged, pruned ones.

The files depend only on the merged counts, which do not depend on how the corpora were cut or
who counted what: any number of workers gives the files one worker gives. With min_frequency
0 or 1, a `library: rustbpe` job gives the files of the same spec with streamed counting.

Faults: a helper that dies (or stalls: a part's claim beats only while its documents are read)
leaves its part 'running' and silent; after `sweep_silent_after` any
worker claims it again (claims are counted, and only the latest claim's counts are kept).
The coordinator dying leaves the job silent: the sweeper's take-over starts a new attempt,
which plans its parts afresh (the old attempt's rows are deleted; a late helper of the old
attempt finds its row gone and drops its spill). Spills live under the job's prefix, so a
failed job's clean-up and the store's reconciliation remove them with the rest.
"""

import logging
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer

from tokenmill.corpora.hashes import SeenDocuments
from tokenmill.corpora.ranges import Numbered, Part, part_documents, plan
from tokenmill.db import transaction
from tokenmill.errors import InvalidCorpus, SlowDocument
from tokenmill.models import Corpus, Status, TrainingJob
from tokenmill.queued_work.lifecycle import fail
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.parts import (
    COUNTING,
    Planned,
    claim_part,
    finish_part,
    forget_parts,
    helper_guard,
    part_heartbeat,
    plan_parts,
    send_helpers,
    work_through,
)
from tokenmill.queued_work.progress import Report
from tokenmill.settings import COUNT_PART_BYTES
from tokenmill.store import ObjectStore, delete_now_or_later
from tokenmill.training.counting import spills
from tokenmill.training.counting.merge import Counts, Pruned, gathered, learner_budget
from tokenmill.training.mixtures import Drawn, repeated_positions, without_positions
from tokenmill.training.patterns import SUPERWORD_SPLIT
from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS, SlowRegex, took_over
from tokenmill.training.spec import TrainingSpec

log = logging.getLogger(__name__)

Dispatch = Callable[[uuid.UUID, int, str, int], None]  # (job, attempt, prefix, how many helpers)


@dataclass(frozen=True)
class Helpers:
    """How a worker's distributed-counting jobs get help, from its settings."""

    dispatch: Dispatch | None = None  # sends the helper tasks (None: the coordinator counts alone)
    count: int = 0  # at most this many helper tasks per job
    part_bytes: int = COUNT_PART_BYTES
    max_line_bytes: int | None = None


@dataclass(frozen=True)
class Counting:
    """What the coordinator needs besides the spec and the corpora: its job's attempt and help."""

    factory: sessionmaker[Session]
    job_id: uuid.UUID
    attempt: int
    prefix: str  # the job's prefix in the store
    limits: WorkLimits
    helpers: Helpers


def counts_prefix(prefix: str, attempt: int | None = None) -> str:
    return f"{prefix}/counts/" if attempt is None else f"{prefix}/counts/{attempt}/"


def train_counted(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], counting: Counting,
                  report: Report, lineage: dict[str, Any], regex_seconds: float = REGEX_DOCUMENT_SECONDS,
                  drawn: Drawn | None = None) -> tuple[Tokenizer, dict[str, bytes]]:
    """Count the corpora in parts on every worker that helps (`count_in_parts`), then learn from
    the merged counts, kept within the job's memory (tokenmill.training.counting.merge), what that
    left out recorded in `lineage` as `pruned`."""
    spilled = count_in_parts(spec, store, corpora, counting, report, regex_seconds, drawn)
    report("merging counts", 0.5, force=True)

    def merged() -> Counts:
        arrays, pruned = spilled.merged(PIECES, spec.min_frequency, learner_budget(counting.limits.max_memory))
        lineage["pruned"] = pruned.record()
        return arrays

    result = _learn(spec, merged, report)
    log.info("job %s: learned from the merged counts (this process holds %d MiB)", counting.job_id,
             psutil.Process().memory_info().rss >> 20)
    forget_counts(store, counting)
    return result


# What a part's spills hold, as the suffix of their keys: the spec's pieces, and for a superword
# spec (SuperBPE) the spans of its second stage as well (tokenmill.training.patterns.SUPERWORD_SPLIT).
PIECES = ""
SPANS = "-spans"


@dataclass(frozen=True)
class Spilled:
    """The spills of every part of a job's attempt, in part order, with each part's weight."""

    store: ObjectStore
    job_id: uuid.UUID
    keys: list[str]
    weights: list[float]

    def merged(self, kind: str, min_count: int, budget: int | None) -> tuple[Counts, Pruned]:
        """The parts' counts of one kind (PIECES or SPANS) added up in one streaming pass, those
        seen fewer than `min_count` times left out, and more if the rest would not fit `budget`."""
        counted = spills.merged([spills.weighted(spills.records(self.store.iter_chunks(key + kind, spills.SPILL_READ)),
                                                 weight) for key, weight in zip(self.keys, self.weights, strict=True)])
        arrays, pruned = gathered(counted, min_count, budget)
        if pruned.raised:
            log.warning("job %s: the merged counts kept pieces seen %d times or more to fit the job's memory "
                        "(%d distinct pieces dropped)", self.job_id, pruned.threshold, pruned.dropped)
        return arrays, pruned


def count_in_parts(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], counting: Counting,
                   report: Report, regex_seconds: float = REGEX_DOCUMENT_SECONDS,
                   drawn: Drawn | None = None) -> Spilled:
    """Cut the corpora into parts, send helpers, count parts here too until every part is
    counted, and return their spills (a custom regex may take at most `regex_seconds` on one
    document here; helpers have their own). A mixture's rates weigh each part's counts
    (`drawn`); a corpus of rate 0 is not counted. `forget_counts` deletes the parts and spills."""
    helpers = counting.helpers
    if drawn is not None:
        corpora = [corpus for corpus, rate in zip(corpora, drawn.weights(corpora)) if rate > 0]
    parts = plan(corpora, helpers.part_bytes)
    _plan(counting, parts)
    if spec.deduplicate:
        assert drawn is not None  # Drawn.of makes one for every deduplicating spec
        _find_repeats(store, counting, parts, drawn, report)
    dispatch = helpers.dispatch
    send_helpers(None if dispatch is None else lambda count: dispatch(counting.job_id, counting.attempt, counting.prefix,
                                                                     count),
                 helpers.count, len(parts), f"job {counting.job_id}")
    keys = _count_all(spec, store, counting, len(parts), report, regex_seconds)
    log.info("job %s: %d parts counted, merging their counts (this process holds %d MiB)", counting.job_id, len(parts),
             psutil.Process().memory_info().rss >> 20)
    weights = drawn.weights(part.corpus for part in parts) if drawn is not None else [1.0] * len(parts)
    if drawn is not None:
        for corpus in corpora:
            drawn.weighed(corpus)
        drawn.end()
    return Spilled(store, counting.job_id, keys, weights)


def forget_counts(store: ObjectStore, counting: Counting) -> None:
    """Delete the job's parts and every spill of theirs, once learned from."""
    with transaction(counting.factory) as session:
        forget_parts(session, COUNTING, counting.job_id)
    delete_now_or_later(store.delete_prefix, counts_prefix(counting.prefix))


def repeats_key(prefix: str, attempt: int, part: int) -> str:
    """Where the positions of a part's documents seen in earlier parts are (deduplicate)."""
    return f"{counts_prefix(prefix, attempt)}repeats-{part}"


def _find_repeats(store: ObjectStore, counting: Counting, parts: list[Part], drawn: Drawn,
                  report: Report) -> None:
    # One pass over the parts in order, before anyone counts: each part's documents seen in an
    # earlier part (or earlier in it) go beside its counts, for whoever counts it to leave out.
    seen = SeenDocuments()
    for number, part in enumerate(parts):
        report("finding duplicates", 0.0)
        documents = Numbered(part_documents(store, part, counting.helpers.max_line_bytes))
        positions, kept_bytes = repeated_positions(documents, seen)
        store.put_bytes(repeats_key(counting.prefix, counting.attempt, number), positions.astype("<i8").tobytes())
        drawn.deduplicated_part(part.corpus, documents.count, len(positions), kept_bytes)
    log.info("job %s: %d distinct documents in %d parts", counting.job_id, seen.count, len(parts))


def _learn(spec: TrainingSpec, merged: Callable[[], Counts], report: Report) -> tuple[Tokenizer, dict[str, bytes]]:
    # Learned from the merged counts, made here (`learned_from_counts` says why).
    if spec.library == "sentencepiece":
        from tokenmill.training.with_sentencepiece import train_sentencepiece

        lengths, seen, data = merged()
        ends = np.cumsum(lengths)
        lines = (f"{data[end - length:end].tobytes().decode('utf-8')}\t{count}"
                 for length, end, count in zip(lengths.tolist(), ends.tolist(), seen.tolist()))
        result = train_sentencepiece(spec, lines, lambda done: report("training", 0.5 + 0.3 * done), counted=True)
        return result.tokenizer_and_files()
    from tokenmill.training.with_tokenmill import learned_from_counts

    tokenizer = learned_from_counts(spec, merged)
    report("training", 0.8, force=True)
    return tokenizer, {}


def _plan(counting: Counting, parts: list[Part]) -> None:
    plan_parts(counting.factory, COUNTING, counting.job_id, counting.attempt,
               (Planned(part.corpus.id, part.start, part.end) for part in parts))


def _count_all(spec: TrainingSpec, store: ObjectStore, counting: Counting, total: int, report: Report,
               regex_seconds: float) -> list[str]:
    # Count what no one has claimed (or what a silent worker left), then wait for the others.
    counted = 0

    def alive() -> None:  # the coordinator's progress report, which also notices a cancel
        report("counting", 0.5 * counted / max(total, 1))

    def finished(count: int) -> None:
        nonlocal counted
        counted = count
        alive()

    return work_through(counting.factory, COUNTING, counting.job_id, counting.attempt, total, lambda: count_claimed_parts(
        counting.factory, store, counting.job_id, counting.attempt, counting.prefix, counting.limits, spec,
        counting.helpers.max_line_bytes, alive, regex_seconds), finished)


def help_counting(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, attempt: int, prefix: str,
                  limits: WorkLimits, max_line_bytes: int | None = None,
                  regex_seconds: float = REGEX_DOCUMENT_SECONDS) -> int:
    """A helper task's work: `count_claimed_parts` under the job's memory limit. Past it, the job
    fails with the reason and this process exits, as the coordinator's would (a part's counts
    that do not fit one worker would not fit the coordinator either). A custom regex past
    `regex_seconds` on one document fails the job too: counting the part again would not help."""
    with helper_guard(factory, COUNTING, job_id, attempt, limits):
        try:
            return count_claimed_parts(factory, store, job_id, attempt, prefix, limits, max_line_bytes=max_line_bytes,
                                       regex_seconds=regex_seconds)
        except SlowRegex as exc:
            log.warning("job %s: %s", job_id, exc.detail)
            fail(factory, TrainingJob, job_id, exc.detail, attempt)
            return 0


def count_claimed_parts(factory: sessionmaker[Session], store: ObjectStore, job_id: uuid.UUID, attempt: int, prefix: str,
                        limits: WorkLimits, spec: TrainingSpec | None = None, max_line_bytes: int | None = None,
                        alive: Callable[[], None] | None = None, regex_seconds: float = REGEX_DOCUMENT_SECONDS) -> int:
    """Claim and count parts of the job's attempt until none is left to claim; returns how many
    this worker counted. A helper task calls this; so does the coordinator. SlowRegex when a
    custom regex takes longer than `regex_seconds` on one document."""
    if spec is None:
        with factory() as session:
            job = session.get(TrainingJob, job_id)
            if job is None or job.status != Status.RUNNING or job.attempts != attempt:
                return 0
            spec = TrainingSpec.model_validate(job.spec)
    from tokenmill.training.splitting.counting import count as count_pieces  # numba: a counting worker's only

    splits: list[tuple[str, spills.Split]] = []  # built at the first claim: the coordinator polls here while it waits
    counted = 0
    while (row := claim_part(factory, COUNTING, job_id, attempt, limits)) is not None:
        with factory() as session:
            corpus = session.get(Corpus, row.corpus_id)
        if corpus is None:
            raise InvalidCorpus("a training corpus was deleted while the job counted it")
        splits = splits or _splits(spec, regex_seconds)
        key = f"{counts_prefix(prefix, attempt)}{row.part}-{row.claims}"
        part = Part(corpus, row.start, row.end)
        repeats = (np.frombuffer(store.get_bytes(repeats_key(prefix, attempt, row.part)), dtype="<i8")
                   if spec.deduplicate else None)  # read once, for every pass
        reading = Numbered(iter(()), alive)
        try:
            with part_heartbeat(factory, COUNTING, row, limits, reading.read):  # the claim beats while counting moves
                for kind, split in splits:  # a pass over the part's documents for each
                    reading.documents = _documents(store, part, max_line_bytes, repeats)
                    counts = count_pieces(iter(reading), split)  # compiled for a preset (training.splitting)
                    store.put_bytes(key + kind, spills.spilled(counts))
                    del counts
        except SlowDocument as slow:
            assert spec.pre_tokenizer_regex is not None  # only a custom regex's split is limited
            raise SlowRegex(spec.pre_tokenizer_regex, took_over(regex_seconds), where=(
                f"document {slow.number + 1:,} counted from byte {part.start:,} of corpus {corpus.name!r}")) from None
        if finish_part(factory, COUNTING, row, key):
            log.info("counted part %d of job %s (%d bytes)", row.part, job_id, row.end - row.start)
        else:
            for kind, _ in splits:  # taken over meanwhile: the latest claim's counts are the ones kept
                delete_now_or_later(store.delete, key + kind)
        counted += 1
    return counted


def _splits(spec: TrainingSpec, regex_seconds: float) -> list[tuple[str, spills.Split]]:
    """What a part is counted into: the spec's pieces, and a superword spec's spans."""
    splits = [(PIECES, spills.splitter(spec, regex_seconds))]
    if spec.superword is not None:
        splits.append((SPANS, spills.split_by(SUPERWORD_SPLIT, None)))
    return splits


def _documents(store: ObjectStore, part: Part, max_line_bytes: int | None,
               repeats: np.ndarray | None) -> Iterator[str]:
    """The documents the part owns, without those at `repeats` (deduplicate: seen in an earlier part)."""
    documents = part_documents(store, part, max_line_bytes)
    return documents if repeats is None else without_positions(documents, repeats)
