"""Counting in parts: every line in exactly one part, spills that merge to the whole's counts."""

import random
from collections import Counter

import pytest

from tokenmill.corpora import ranges
from tokenmill.corpora.reading import corpus_documents
from tokenmill.models import Corpus
from tokenmill.store import LocalStore
from tokenmill.training.counting import spills


def _stored(tmp_path, data: bytes, fmt: str = "text") -> tuple[LocalStore, Corpus]:
    store = LocalStore(tmp_path)
    store.put_bytes("corpora/t/c", data)
    return store, Corpus(storage_key="corpora/t/c", bytes=len(data), format=fmt, text_field=None)


def _random_text(rng: random.Random, lines: int) -> bytes:
    words = ["a", "bb", "ccc", "día", "日本", " ", "", "x" * 40]
    return "".join("".join(rng.choice(words) for _ in range(rng.randrange(0, 12))) + "\n"
                   for _ in range(lines)).encode()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.slow
def test_the_parts_own_every_line_once_whatever_their_size(tmp_path, seed):
    rng = random.Random(seed)
    data = _random_text(rng, 200)
    if seed % 2:
        data = data.rstrip(b"\n")  # no newline at the end
    store, corpus = _stored(tmp_path, data)
    whole = list(corpus_documents(store, corpus))
    for part_bytes in (1, 2, 3, 7, 64, 1000, len(data), len(data) + 5):
        cut = ranges.plan([corpus], part_bytes)
        assert cut[0].start == 0 and cut[-1].end == len(data)
        documents = [d for part in cut for d in ranges.part_documents(store, part)]
        assert documents == whole, part_bytes


def test_a_line_longer_than_a_part_is_read_once_by_the_part_it_starts_in(tmp_path):
    store, corpus = _stored(tmp_path, b"short\n" + b"y" * 5000 + b"\nend\n")
    cut = ranges.plan([corpus], 100)
    owned = [list(ranges.part_documents(store, part)) for part in cut]
    assert owned[0] == ["short", "y" * 5000]
    assert [d for docs in owned[1:] for d in docs] == ["end"]


def test_spills_merge_to_the_counts_of_the_whole_leaving_out_the_rare():
    rng = random.Random(3)
    pieces = ["a", "b", "é", "日", "ab", " x", "\n", "\t", "zz"]
    chunks = [[rng.choice(pieces) for _ in range(rng.randrange(0, 300))] for _ in range(7)]
    spilled = [spills.spilled(Counter(chunk)) for chunk in chunks]
    whole = Counter(piece for chunk in chunks for piece in chunk)
    merged = list(spills.merged([spills.records([spill[:5], spill[5:]]) for spill in spilled], 1))
    assert merged == sorted((piece.encode(), seen) for piece, seen in whole.items())
    rare = min(whole.values()) + 1
    pruned = dict(spills.merged([spills.records([spill]) for spill in spilled], rare))
    assert pruned == {piece.encode(): seen for piece, seen in whole.items() if seen >= rare}


def test_a_truncated_spill_is_refused():
    spill = spills.spilled(Counter({"abc": 3, "d": 1}))
    import zlib

    raw = zlib.decompress(spill)
    with pytest.raises(ValueError, match="inside a record"):
        list(spills.records([zlib.compress(raw[:-1])]))
