"""A document's identity for exact deduplication, and sets of them at 8 bytes a document.

One definition for every part of the core that asks "was this exact text seen before": the
corpus statistics (exact duplicates within a corpus and across a team's corpora,
tokenmill.corpora.duplicates) and training's `deduplicate` (tokenmill.training.mixtures).
A hash is 8 bytes of BLAKE2b of the document's UTF-8, as an unsigned integer read
little-endian; stored arrays of them are little-endian uint64 (`HASH_DTYPE`).
"""

import hashlib

import numpy as np

HASH_BATCH = 4096  # documents hashed and looked up together
HASH_DTYPE = np.dtype("<u8")  # a stored hash array: sorted, little-endian, 8 bytes a document


def document_hash(document: str) -> int:
    """A document's identity for exact deduplication: 8 bytes of BLAKE2b of its UTF-8."""
    return int.from_bytes(hashlib.blake2b(document.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class SeenDocuments:
    """The hashes of the documents seen so far, in sorted runs that merge when two are the same
    size (a binary counter: log₂ n runs, each hash merged log₂ n times)."""

    def __init__(self) -> None:
        self.runs: list[np.ndarray] = []
        self.count = 0

    def first_seen(self, hashes: np.ndarray) -> np.ndarray:
        """Which of `hashes` (in order) are seen for the first time, counting the earlier ones of
        the same batch; they are then remembered."""
        _, first = np.unique(hashes, return_index=True)
        fresh = np.zeros(len(hashes), dtype=bool)
        fresh[first] = True
        for run in self.runs:
            at = np.searchsorted(run, hashes).clip(0, len(run) - 1)
            fresh &= run[at] != hashes
        new = np.sort(hashes[fresh])
        if len(new):
            self._add(new)
        return fresh

    def sorted(self) -> np.ndarray:
        """Every hash seen, once each, ascending: the runs (disjoint) merged into one array."""
        if not self.runs:
            return np.empty(0, dtype=np.uint64)
        return np.sort(np.concatenate(self.runs), kind="stable")  # a merge of sorted runs

    def _add(self, run: np.ndarray) -> None:
        self.count += len(run)
        while self.runs and len(self.runs[-1]) <= len(run):
            run = np.sort(np.concatenate([self.runs.pop(), run]), kind="mergesort")
        self.runs.append(run)
