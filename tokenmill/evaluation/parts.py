"""Measuring a corpus whole on many workers: an evaluation run, or a training job evaluating its
new version, that reads every byte of a corpus (TOKENMILL_EVALUATION_SAMPLE_BYTES=0, or a corpus
below it) larger than one part.

The owner's worker (the coordinator) cuts the corpus into byte ranges (tokenmill.corpora.ranges; one
`measure_parts` or `job_measure_parts` row each, for this attempt), stores the encoder's recipe
beside them, sends helper tasks on the broker, and measures parts itself like any helper: each
worker claims a part, measures the documents it owns into a MetricsAccumulator and stores its sums
(tokens, words, characters, bytes, continued words, unknowns, the per-document moments of the
intervals and the per-id histogram the entropies need) under the attempt's prefix. Once every
part is measured, the coordinator adds the sums up. The metrics are those of one pass over the
corpus, whoever measured what: the same integers, and the float moments up to the order of
their addition.

Faults, as in distributed counting (tokenmill.training.counting.distributed): a part whose worker
died or stalled (its claim beats only while its documents are read) falls silent and is measured
again by whoever claims it next, the waiting coordinator too. The coordinator dying leaves its
owner silent; the sweeper's take-over plans the parts afresh, and a late helper of the old
attempt finds its row gone and drops its sums. The objects live under the attempt's prefix
(`evaluations/<run>/<attempt>/`, `versions/<team>/<job>/measures/<attempt>/`): deleted once the
corpus is measured, by the owner's discard when it fails, and by reconciliation after it ended.
"""

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from tokenmill.corpora.ranges import Numbered, Part, part_documents, plan
from tokenmill.db import transaction
from tokenmill.errors import InvalidCorpus
from tokenmill.evaluation.encoders import Encoder, recipe_encoder, recipe_from_json, recipe_json
from tokenmill.evaluation.measuring import BATCH_LINES, accumulated, batched
from tokenmill.evaluation.metrics import MetricsAccumulator
from tokenmill.models import Corpus
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.parts import (
    MEASURING,
    MEASURING_FOR_JOBS,
    Parts,
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
from tokenmill.settings import EVALUATION_PART_BYTES
from tokenmill.store import ObjectStore, delete_now_or_later

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Owner:
    """Whose parts they are (a run's or a job's attempt) and where their objects go: what a helper
    is told."""

    kind: Parts  # MEASURING or MEASURING_FOR_JOBS
    owner_id: uuid.UUID
    attempt: int
    prefix: str  # in the store, this attempt's own

    def __str__(self) -> str:
        return f"{self.kind.owner_called} {self.owner_id}"

    def recipe_key(self, corpus_id: uuid.UUID) -> str:
        return f"{self.prefix}{corpus_id}/recipe.json"


def run_owner(run_id: uuid.UUID, attempt: int) -> Owner:
    """The parts of an evaluation run's attempt."""
    return Owner(MEASURING, run_id, attempt, f"{run_prefix(run_id)}{attempt}/")


def job_owner(job_id: uuid.UUID, attempt: int, job_prefix: str) -> Owner:
    """The parts of a training job's attempt, under the job's prefix (tokenmill.jobs.pipeline.job_prefix)."""
    return Owner(MEASURING_FOR_JOBS, job_id, attempt, f"{job_prefix}/measures/{attempt}/")


def run_prefix(run_id: uuid.UUID) -> str:
    return f"evaluations/{run_id}/"


Dispatch = Callable[[Owner, int], None]  # (whose parts, how many helpers)


@dataclass(frozen=True)
class MeasureHelpers:
    """How a worker's runs and jobs get help measuring a corpus whole, from its settings."""

    dispatch: Dispatch | None = None  # sends the helper tasks (None: the coordinator measures alone)
    count: int = 0  # at most this many helper tasks per corpus
    part_bytes: int = EVALUATION_PART_BYTES
    max_line_bytes: int | None = None


@dataclass(frozen=True)
class Spread:
    """What the coordinator needs to spread a corpus: whose parts, and help."""

    factory: sessionmaker[Session]
    owner: Owner
    limits: WorkLimits
    helpers: MeasureHelpers

    def takes(self, corpus: Corpus, encoder: Encoder) -> bool:
        """Whether measuring this corpus whole is spread: more than one part, and an encoder
        another process can build."""
        return encoder.recipe is not None and corpus.bytes > self.helpers.part_bytes


def measure_spread(encoder: Encoder, store: ObjectStore, corpus: Corpus, spread: Spread) -> MetricsAccumulator:
    """The metrics' sums of an encoder on every document of a corpus, measured in parts by every
    worker that helps, this one included."""
    assert encoder.recipe is not None  # Spread.takes
    owner, factory = spread.owner, spread.factory
    parts = plan([corpus], spread.helpers.part_bytes)
    store.put_bytes(owner.recipe_key(corpus.id), recipe_json(encoder.recipe | {"name": encoder.name}))
    plan_parts(factory, owner.kind, owner.owner_id, owner.attempt,
               (Planned(corpus.id, part.start, part.end) for part in parts))
    dispatch = spread.helpers.dispatch
    send_helpers(None if dispatch is None else lambda count: dispatch(owner, count), spread.helpers.count, len(parts),
                 str(owner))
    keys = work_through(factory, owner.kind, owner.owner_id, owner.attempt, len(parts), lambda: measure_claimed_parts(
        factory, store, owner, spread.limits, spread.helpers.max_line_bytes))
    total = MetricsAccumulator(encoder.vocab_size, encoder.unk_id, encoder.byte_fallback_ids)
    for key in keys:
        total.merge(MetricsAccumulator.from_bytes(store.get_bytes(key), encoder.vocab_size, encoder.unk_id,
                                                  encoder.byte_fallback_ids))
    log.info("%s: corpus %s measured in %d parts", owner, corpus.id, len(parts))
    with transaction(factory) as session:
        forget_parts(session, owner.kind, owner.owner_id)
    discard_spread(store, owner)
    return total


def discard_spread(store: ObjectStore, owner: Owner) -> None:
    """Delete the objects of the owner's attempt now if the store answers; reconciliation otherwise."""
    delete_now_or_later(store.delete_prefix, owner.prefix)


def help_measuring(factory: sessionmaker[Session], store: ObjectStore, owner: Owner, limits: WorkLimits,
                   max_line_bytes: int | None = None) -> int:
    """A helper task's work: `measure_claimed_parts` under the owner's memory limit; past it, the
    owner fails with the reason and this process exits, as the coordinator's would."""
    with helper_guard(factory, owner.kind, owner.owner_id, owner.attempt, limits):
        return measure_claimed_parts(factory, store, owner, limits, max_line_bytes)


def measure_claimed_parts(factory: sessionmaker[Session], store: ObjectStore, owner: Owner, limits: WorkLimits,
                          max_line_bytes: int | None = None) -> int:
    """Claim and measure parts of the owner's attempt until none is left to claim; returns how
    many this worker measured. A helper task calls this; so does the coordinator."""
    # By recipe, read again at each claim: the owner measures one corpus with one encoder after
    # another (a version, then the references), each plan replacing the last under the same key.
    encoders: dict[bytes, Encoder] = {}
    measured = 0
    while (row := claim_part(factory, owner.kind, owner.owner_id, owner.attempt, limits)) is not None:
        with factory() as session:
            corpus = session.get(Corpus, row.corpus_id)
        if corpus is None:
            raise InvalidCorpus("an evaluation corpus was deleted while it was measured")
        recipe = store.get_bytes(owner.recipe_key(corpus.id))  # stored before the part was planned
        if recipe not in encoders:
            encoders.clear()
            encoders[recipe] = recipe_encoder(recipe_from_json(recipe))
        reading = Numbered(part_documents(store, Part(corpus, row.start, row.end), max_line_bytes))
        with part_heartbeat(factory, owner.kind, row, limits, reading.read):  # the claim beats while reading moves
            sums = accumulated(encoders[recipe], batched(reading, BATCH_LINES)).to_bytes()
        key = f"{owner.prefix}{row.part}-{row.claims}.npz"
        store.put_bytes(key, sums)
        if finish_part(factory, owner.kind, row, key):
            log.info("measured part %d of %s (%d bytes)", row.part, owner, row.end - row.start)
        else:  # taken over meanwhile: the latest claim's sums are the ones kept
            delete_now_or_later(store.delete, key)
        measured += 1
    return measured
