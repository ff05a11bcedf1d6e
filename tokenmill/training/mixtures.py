"""Which documents a job trains on, and how often: the spec's `mixture` and `deduplicate`.

A mixture gives each training corpus a share of the training bytes, either directly (`weights`)
or by language (`language_temperature` τ: a language's share is proportional to its size to
the power τ, as multilingual models sample their data: τ = 1 is the raw mix, τ → 0 uniform);
within a language its corpora keep their relative sizes. The total stays the raw total, so a
mixture moves bytes between corpora without making the job bigger. `max_repeats` (UniMax)
caps how many times over a corpus may be read; what a capped corpus cannot take goes to the
others, in proportion to their shares.

Each corpus then has a rate, the expected number of copies of each of its documents: a
document is read `floor(rate)` times, and once more with probability `rate - floor(rate)`,
drawn from a generator seeded by the spec's seed and the corpus's id, so a job draws the same
documents every time, on every worker and for every library. Distributed counting weighs each
part's counts by its corpus's rate instead of copying text (tokenmill.training.counting.distributed).

`deduplicate` drops every document seen earlier in the job's training corpora (exact
duplicates, by an 8-byte BLAKE2b of its UTF-8): the set of hashes costs 8 bytes a distinct
document, kept as sorted runs merged like a binary counter.
"""

import itertools
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenmill.corpora.hashes import HASH_BATCH, SeenDocuments, document_hash

if TYPE_CHECKING:
    from tokenmill.models import Corpus
    from tokenmill.training.spec import MixtureSpec, TrainingSpec



def weights_refusal(mixture: "MixtureSpec", corpora: "list[Corpus]") -> str | None:
    """Why the mixture's weights do not fit the job's training corpora, or None."""
    if mixture.weights is None:
        return None
    ids = {str(c.id) for c in corpora}
    if unknown := sorted(set(mixture.weights) - ids):
        return f"weights name {unknown[0]!r}, which is not one of train_corpora"
    if missing := [c.name for c in corpora if str(c.id) not in mixture.weights]:
        return f"weights give no weight to training corpus {missing[0]!r} (0 leaves a corpus out)"
    if not any(mixture.weights[key] for key in ids):
        return "every training corpus has weight 0"
    return None


def corpus_rates(mixture: "MixtureSpec", corpora: "list[Corpus]") -> dict[str, float]:
    """How many copies of each document of each corpus (by id) the mixture asks for, on average."""
    sizes = {str(c.id): max(c.bytes, 1) for c in corpora}
    shares = _weighted_shares(mixture.weights, sizes) if mixture.weights is not None else \
        _tempered_shares(float(mixture.language_temperature or 0.0), corpora, sizes)
    targets = _capped(shares, sizes, sum(sizes.values()), mixture.max_repeats)
    return {key: targets[key] / sizes[key] for key in sizes}


def _weighted_shares(weights: dict[str, float], sizes: dict[str, int]) -> dict[str, float]:
    total = sum(weights.get(key, 0.0) for key in sizes)
    return {key: weights.get(key, 0.0) / total for key in sizes}


def _tempered_shares(temperature: float, corpora: "list[Corpus]", sizes: dict[str, int]) -> dict[str, float]:
    languages: dict[str, int] = {}
    for corpus in corpora:
        languages[corpus.language] = languages.get(corpus.language, 0) + sizes[str(corpus.id)]
    # In logarithms: a size of 10^12 to a power near 1 stays a float.
    top = max(math.log(size) for size in languages.values())
    tempered = {language: math.exp(temperature * (math.log(size) - top)) for language, size in languages.items()}
    norm = sum(tempered.values())
    return {str(c.id): tempered[c.language] / norm * sizes[str(c.id)] / languages[c.language] for c in corpora}


def _capped(shares: dict[str, float], sizes: dict[str, int], total: int,
            max_repeats: float | None) -> dict[str, float]:
    """Each corpus's bytes: its share of `total`, at most `max_repeats` times its size, what a
    capped corpus leaves given to the uncapped ones in proportion to their shares (UniMax)."""
    targets = {key: share * total for key, share in shares.items()}
    if max_repeats is None:
        return targets
    capped: set[str] = set()
    while True:
        over = {key for key in targets if key not in capped and targets[key] > max_repeats * sizes[key]}
        if not over:
            return targets
        capped |= over
        for key in over:
            targets[key] = max_repeats * sizes[key]
        left = total - sum(targets[key] for key in capped)
        free = [key for key in targets if key not in capped]
        weight = sum(shares[key] for key in free)
        if not free or weight <= 0 or left <= 0:
            return targets
        for key in free:
            targets[key] = left * shares[key] / weight


def copy_counts(rate: float, seed: int, corpus_id: str) -> Iterator[int]:
    """How many copies of each document in turn: `floor(rate)`, and one more with probability
    `rate - floor(rate)`, drawn from the seed and the corpus (endless: zip it with the documents)."""
    whole, fraction = int(rate), rate - int(rate)
    rng = random.Random(f"{seed}:{corpus_id}")  # a str seed is hashed by SHA-512: the same everywhere
    while True:
        yield whole + (rng.random() < fraction if fraction else 0)


def drawn_copies(documents: Iterable[str], rate: float, seed: int, corpus_id: str) -> Iterator[str]:
    """Each document as many times as `copy_counts` says."""
    for document, copies in zip(documents, copy_counts(rate, seed, corpus_id)):
        for _ in range(copies):
            yield document


def distinct(documents: Iterable[str], seen: SeenDocuments) -> Iterator[str]:
    """The documents not seen before (in `seen`, which remembers them), in order."""
    for batch in _batches(documents):
        for document, fresh in zip(batch, seen.first_seen(_hashes(batch))):
            if fresh:
                yield document


def repeated_positions(documents: Iterable[str], seen: SeenDocuments) -> tuple[np.ndarray, int]:
    """The positions (from 0) of the documents seen before (in `seen`, which remembers the
    others), and the UTF-8 bytes of the others: what a part's counting leaves out, and keeps."""
    positions, kept, start = [], 0, 0
    for batch in _batches(documents):
        fresh = seen.first_seen(_hashes(batch))
        positions.append(np.flatnonzero(~fresh) + start)
        kept += sum(len(d.encode("utf-8", "surrogatepass")) for d, new in zip(batch, fresh) if new)
        start += len(batch)
    return (np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)), kept


def without_positions(documents: Iterable[str], positions: np.ndarray) -> Iterator[str]:
    """The documents but those at `positions` (sorted, from 0)."""
    skip = iter(positions.tolist())
    next_skip = next(skip, -1)
    for number, document in enumerate(documents):
        if number == next_skip:
            next_skip = next(skip, -1)
            continue
        yield document


def _batches(documents: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for document in documents:
        batch.append(document)
        if len(batch) == HASH_BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _hashes(batch: list[str]) -> np.ndarray:
    return np.fromiter((document_hash(d) for d in batch), dtype=np.uint64, count=len(batch))


@dataclass
class Drawn:
    """What a job trained on, per corpus, as it is read: the lineage's `training_data`."""

    corpora: "list[Corpus]"
    rates: dict[str, float] | None  # None: every document once
    deduplicate: bool
    seed: int = 0
    into: dict[str, Any] | None = None  # where each finished pass writes its record (a lineage)
    seen: SeenDocuments | None = None
    read: dict[str, int] = field(default_factory=dict)  # documents read from each corpus
    unique: dict[str, int] = field(default_factory=dict)  # of which not seen before (deduplicate)
    kept: dict[str, int] = field(default_factory=dict)  # documents trained on (copies counted)
    trained_bytes: dict[str, int] = field(default_factory=dict)
    kept_bytes: dict[str, int] = field(default_factory=dict)  # distributed deduplication: each corpus's distinct bytes
    weighted: bool = False  # the counts were weighted (distributed counting): bytes are expected ones

    @classmethod
    def of(cls, spec: "TrainingSpec", corpora: "list[Corpus]", lineage: dict[str, Any]) -> "Drawn | None":
        """How the spec draws from these corpora, recorded in `lineage` as `training_data` after
        each pass; None when it trains on every document once."""
        if spec.mixture is None and not spec.deduplicate:
            return None
        rates = corpus_rates(spec.mixture, corpora) if spec.mixture is not None else None
        return cls(corpora, rates, spec.deduplicate, spec.seed, lineage)

    def characters(self) -> int:
        """About how many characters a pass reads (for progress)."""
        rates = self.rates or {}
        return round(sum(c.characters * rates.get(str(c.id), 1.0) for c in self.corpora))

    def begin(self) -> None:
        """A new pass over the corpora: the same draws as every other pass, counted afresh."""
        self.seen = SeenDocuments() if self.deduplicate else None

    def end(self) -> None:
        """A pass read every corpus: its record goes into the lineage."""
        if self.into is not None:
            self.into["training_data"] = self.record()

    def documents(self, corpus: "Corpus", documents: Iterable[str]) -> Iterator[str]:
        """The corpus's documents as the job trains on them, counted."""
        seed, seen = self.seed, self.seen
        key = str(corpus.id)
        self.read[key] = self.unique[key] = self.kept[key] = self.trained_bytes[key] = 0
        if self.rates is not None and self.rates[key] == 0:
            return  # left out: not even read
        stream: Iterable[str] = self._counted(documents, self.read, key)
        if seen is not None:
            stream = self._counted(distinct(stream, seen), self.unique, key)
        copies = copy_counts(self.rates[key], seed, key) if self.rates is not None else itertools.repeat(1)
        for document, times in zip(stream, copies):
            if times:  # its bytes counted once, whatever its copies
                self.kept[key] += times
                self.trained_bytes[key] += times * len(document.encode("utf-8", "surrogatepass"))
                for _ in range(times):
                    yield document

    @staticmethod
    def _counted(documents: Iterable[str], into: dict[str, int], key: str) -> Iterator[str]:
        for document in documents:
            into[key] += 1
            yield document

    def deduplicated_part(self, corpus: "Corpus", documents: int, repeated: int, kept_bytes: int) -> None:
        """A part of a corpus, to be counted elsewhere without its `repeated` documents."""
        key = str(corpus.id)
        self.read[key] = self.read.get(key, 0) + documents
        self.unique[key] = self.unique.get(key, 0) + documents - repeated
        self.kept_bytes[key] = self.kept_bytes.get(key, 0) + kept_bytes

    def weighed(self, corpus: "Corpus") -> None:
        """A corpus counted in parts, its counts weighted by its rate: its expected bytes."""
        key = str(corpus.id)
        self.weighted = True
        self.trained_bytes[key] = round(self.kept_bytes.get(key, corpus.bytes) * (self.rates or {}).get(key, 1.0))

    def weights(self, corpora: "Iterable[Corpus]") -> list[float]:
        """Each corpus's rate, in order: what its counts are multiplied by."""
        rates = self.rates or {}
        return [rates.get(str(c.id), 1.0) for c in corpora]

    def record(self) -> dict[str, Any]:
        """The effective mixture: bytes per corpus and per language actually trained on."""
        rows: list[dict[str, Any]] = []
        languages: dict[str, int] = {}
        for corpus in self.corpora:
            key = str(corpus.id)
            trained = self.trained_bytes.get(key, 0)
            languages[corpus.language] = languages.get(corpus.language, 0) + trained
            row: dict[str, Any] = {"id": key, "name": corpus.name, "language": corpus.language,
                                   "bytes": corpus.bytes, "trained_bytes": trained}
            if self.rates is not None:
                row["rate"] = round(self.rates[key], 6)
            if key in self.read and not self.weighted:
                row["documents"], row["trained_documents"] = self.read[key], self.kept[key]
            rows.append(row)
        total = sum(languages.values()) or 1
        record: dict[str, Any] = {
            "corpora": rows,
            "languages": {language: {"trained_bytes": size, "share": round(size / total, 6)}
                          for language, size in languages.items()},
            "weighted_counts": self.weighted,
        }
        if self.deduplicate:
            record["duplicates_dropped"] = sum(self.read.values()) - sum(self.unique.values())
        return record
