"""Exact-duplicate documents: counted within a corpus as its statistics stream, and across corpora from the
stored hashes (a local folder store here; tests/api/test_duplicates.py runs them on the real stack)."""

import uuid

import numpy as np
import pytest

from tokenmill.corpora.duplicates import HashedCorpus, hashes_key, store_hashes, team_duplicates
from tokenmill.corpora.hashes import HASH_BATCH, document_hash
from tokenmill.corpora.statistics import CorpusStatistics
from tokenmill.store import LocalStore


def statistics_of(lines) -> CorpusStatistics:
    stats = CorpusStatistics(total_lines=len(lines))
    for line in lines:
        stats.add(line)
    return stats


def test_a_duplicate_is_the_exact_text_of_an_earlier_line():
    # "the cat" ×3 and "a dog" ×2 repeat three times; case, spacing and punctuation make other documents.
    lines = ["the cat", "a dog", "the cat", "The cat", "the cat ", "the cat.", "a dog", "the cat"]
    stats = statistics_of(lines)
    result = stats.result()
    assert (result["duplicate_documents"], result["duplicate_share"]) == (3, pytest.approx(3 / 8))
    assert stats.document_hashes().tolist() == sorted(document_hash(line) for line in set(lines))


def test_duplicates_are_counted_across_batches():
    # 2.5 batches of lines cycling through 3,000 texts: each text after its first time is a duplicate,
    # whether the earlier one is in the same batch or an earlier one.
    lines = [f"document {i % 3000}" for i in range(HASH_BATCH * 5 // 2)]
    stats = statistics_of(lines)
    assert stats.result()["duplicate_documents"] == len(lines) - 3000
    hashes = stats.document_hashes()
    assert hashes.dtype == np.uint64 and len(hashes) == 3000 and np.all(hashes[1:] > hashes[:-1])


def test_a_corpus_without_duplicates_says_zero():
    result = statistics_of(["one", "two", "three"]).result()
    assert (result["duplicate_documents"], result["duplicate_share"]) == (0, 0.0)


class CountingStore(LocalStore):
    """A folder store that counts the objects read."""

    reads = 0

    def iter_chunks(self, key, chunk_size=1024 * 1024, start=0):
        self.reads += 1
        return super().iter_chunks(key, 5, start)  # small chunks: an array is filled piece by piece


def hashed(store, lines) -> HashedCorpus:
    """A corpus of these lines, its statistics computed and its hashes stored as the statistics pass does."""
    corpus_id, team_id = uuid.uuid4(), uuid.uuid4()
    stats = statistics_of(lines)
    store_hashes(store, hashes_key(team_id, corpus_id), stats.document_hashes())
    return HashedCorpus(corpus_id, hashes_key(team_id, corpus_id), uuid.uuid4().hex, len(lines),
                        len(lines) - stats.result()["duplicate_documents"])


def test_stored_hashes_are_sorted_little_endian_uint64(tmp_path):
    store = LocalStore(tmp_path)
    corpus = hashed(store, ["b", "a", "b", "c"])
    stored = store.get_bytes(corpus.key)
    assert stored == np.array(sorted(document_hash(t) for t in "abc"), dtype="<u8").tobytes()


def test_the_team_figure_merges_the_corpora_hashes(tmp_path):
    store = CountingStore(tmp_path)
    # x repeats within the first corpus, w within the second, and y repeats the first corpus's:
    # 7 documents, 4 distinct texts → 3 duplicates, 1 of them across corpora.
    first, second = hashed(store, ["x", "y", "x", "z"]), hashed(store, ["y", "w", "w"])
    pending = HashedCorpus(uuid.uuid4(), "statistics/none/pending.hashes", "0" * 64, 10, None)
    figure = team_duplicates(store, [first, second, pending], max_documents=100)
    assert (figure.corpora, figure.corpora_left_out, figure.documents) == (2, 1, 7)
    assert (figure.duplicate_documents, figure.cross_corpus_duplicates) == (3, 1)
    assert figure.duplicate_share == pytest.approx(3 / 7) and figure.reason is None
    reads = store.reads
    assert team_duplicates(store, [first, second, pending], max_documents=100) == figure
    assert store.reads == reads  # kept by the set of corpora merged: not read again
    alone = team_duplicates(store, [second], max_documents=100)
    assert (alone.documents, alone.duplicate_documents, alone.cross_corpus_duplicates) == (3, 1, 0)


def test_past_the_bound_the_team_figure_is_not_computed(tmp_path):
    store = CountingStore(tmp_path)
    corpora = [hashed(store, ["x", "y", "x", "z"]), hashed(store, ["y", "w", "w"])]  # 3 + 2 distinct documents
    figure = team_duplicates(store, corpora, max_documents=4)
    assert (figure.duplicate_documents, figure.duplicate_share, figure.cross_corpus_duplicates) == (None, None, None)
    assert "5 distinct documents" in (figure.reason or "") and store.reads == 0
    assert team_duplicates(store, corpora, max_documents=5).duplicate_documents == 3


def test_missing_or_damaged_hashes_leave_their_corpus_out(tmp_path):
    store = CountingStore(tmp_path)
    kept, missing, damaged = (hashed(store, ["x", "y"]), hashed(store, ["y", "z"]), hashed(store, ["x", "w"]))
    store.delete(missing.key)
    store.put_bytes(damaged.key, b"\0" * 12)  # not 2 × 8 bytes
    figure = team_duplicates(store, [kept, missing, damaged], max_documents=100)
    assert (figure.corpora, figure.corpora_left_out, figure.documents, figure.duplicate_documents) == (1, 2, 2, 0)
    reads = store.reads
    team_duplicates(store, [kept, missing, damaged], max_documents=100)
    assert store.reads > reads  # an answer with corpora left out for unreadable hashes is not kept
