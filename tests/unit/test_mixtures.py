"""Mixtures and deduplication (issue 25.1-2): the shares each corpus gets, the documents drawn,
the distinct-document filter against a plain set, and the spec's refusals."""

import random
import uuid
from dataclasses import dataclass

import numpy as np
import pytest

from tokenmill.corpora.hashes import SeenDocuments
from tokenmill.errors import InvalidInput
from tokenmill.training import mixtures
from tokenmill.training.counting import spills
from tokenmill.training.mixtures import (
    Drawn,
    corpus_rates,
    distinct,
    drawn_copies,
    repeated_positions,
    weights_refusal,
    without_positions,
)
from tokenmill.training.spec import MixtureSpec, TrainingSpec, resolve_spec


@dataclass
class FakeCorpus:
    name: str
    language: str
    bytes: int
    characters: int = 0
    id: uuid.UUID = None  # type: ignore[assignment]

    def __post_init__(self):
        self.id = uuid.uuid5(uuid.NAMESPACE_URL, self.name)
        self.characters = self.characters or self.bytes


SIZES = {"en": 64_000, "de": 16_000, "fr": 4_000, "hi": 1_000}
CORPORA = [FakeCorpus(language, language, size) for language, size in SIZES.items()]


def trained_bytes(mixture, corpora=CORPORA):
    rates = corpus_rates(mixture, corpora)
    return {c.language: rates[str(c.id)] * c.bytes for c in corpora}


def test_temperature_one_is_the_raw_mix_and_zero_gives_every_language_the_same_bytes():
    raw = trained_bytes(MixtureSpec(language_temperature=1))
    assert raw == pytest.approx({language: float(size) for language, size in SIZES.items()})
    uniform = trained_bytes(MixtureSpec(language_temperature=0))
    total = sum(SIZES.values())
    assert uniform == pytest.approx(dict.fromkeys(SIZES, total / 4))


def test_a_temperature_between_flattens_the_mix_in_proportion_to_size_to_the_power():
    mixed = trained_bytes(MixtureSpec(language_temperature=0.5))
    total = sum(SIZES.values())
    norm = sum(size ** 0.5 for size in SIZES.values())
    assert mixed == pytest.approx({language: total * size ** 0.5 / norm for language, size in SIZES.items()})
    assert sum(mixed.values()) == pytest.approx(total)  # the job reads no more than the raw mix


def test_corpora_of_one_language_keep_their_relative_sizes():
    corpora = [FakeCorpus("en-news", "en", 30_000), FakeCorpus("en-code", "en", 10_000), FakeCorpus("hi", "hi", 1_000)]
    got = corpus_rates(MixtureSpec(language_temperature=0), corpora)
    assert got[str(corpora[0].id)] == pytest.approx(got[str(corpora[1].id)])
    assert 30_000 * got[str(corpora[0].id)] + 10_000 * got[str(corpora[1].id)] == pytest.approx(20_500)


def test_weights_give_each_corpus_its_share_of_the_raw_total():
    weights = {str(CORPORA[0].id): 1, str(CORPORA[1].id): 1, str(CORPORA[2].id): 2, str(CORPORA[3].id): 0}
    got = trained_bytes(MixtureSpec(weights=weights))
    total = sum(SIZES.values())
    assert got == pytest.approx({"en": total / 4, "de": total / 4, "fr": total / 2, "hi": 0.0})


def test_max_repeats_caps_a_small_corpus_and_gives_what_it_cannot_take_to_the_others():
    got = trained_bytes(MixtureSpec(language_temperature=0, max_repeats=4))
    total = sum(SIZES.values())
    assert got["hi"] == pytest.approx(4 * SIZES["hi"])  # 21,250 wanted, 4,000 allowed
    assert got["fr"] == pytest.approx(4 * SIZES["fr"])  # capped in the second round
    # What is left is shared by en and de alike (their shares were equal), the total unchanged.
    assert got["en"] == pytest.approx(got["de"]) and sum(got.values()) == pytest.approx(total)


def test_drawn_copies_repeat_and_sample_whole_documents_the_same_way_every_time():
    documents = [f"document {i}" for i in range(20_000)]
    twice = list(drawn_copies(documents, 2.0, seed=1, corpus_id="a"))
    assert twice == [d for d in documents for _ in range(2)]
    third = list(drawn_copies(documents, 0.3, seed=1, corpus_id="a"))
    assert third == list(drawn_copies(documents, 0.3, seed=1, corpus_id="a"))
    assert third != list(drawn_copies(documents, 0.3, seed=2, corpus_id="a"))
    assert abs(len(third) - 6_000) < 5 * (20_000 * 0.3 * 0.7) ** 0.5
    assert set(third) <= set(documents) and len(set(third)) == len(third)  # sampled, never repeated
    upsampled = list(drawn_copies(documents, 2.5, seed=1, corpus_id="a"))
    assert abs(len(upsampled) - 50_000) < 5 * (20_000 * 0.25) ** 0.5


@pytest.mark.parametrize("batch", [3, 64, 4096])
def test_distinct_keeps_the_first_of_each_document_as_a_set_would(monkeypatch, batch):
    monkeypatch.setattr(mixtures, "HASH_BATCH", batch)
    rng = random.Random(batch)
    documents = [f"text {rng.randrange(3_000)}" for _ in range(10_000)]
    seen, expected = set(), []
    for document in documents:
        if document not in seen:
            seen.add(document)
            expected.append(document)
    hashes = SeenDocuments()
    assert list(distinct(documents, hashes)) == expected
    assert hashes.count == len(expected)
    assert len(hashes.runs) <= int(np.log2(len(expected))) + 1  # merged like a binary counter
    assert list(distinct(documents[:50], hashes)) == []  # it remembers across calls


def test_repeated_positions_leave_out_what_distinct_leaves_out(monkeypatch):
    monkeypatch.setattr(mixtures, "HASH_BATCH", 7)
    rng = random.Random(3)
    parts = [[f"line {rng.randrange(40)}" for _ in range(rng.randrange(0, 30))] for _ in range(6)]
    seen, kept = SeenDocuments(), []
    for part in parts:
        positions, kept_bytes = repeated_positions(part, seen)
        remaining = list(without_positions(part, positions))
        assert kept_bytes == sum(len(d.encode()) for d in remaining)
        kept += remaining
    assert kept == list(distinct([d for part in parts for d in part], SeenDocuments()))


def test_drawn_records_what_each_corpus_and_language_gave():
    a, b = FakeCorpus("a", "en", 10), FakeCorpus("b", "hi", 10)
    lineage = {}
    drawn = Drawn([a, b], None, True, 0, lineage)
    drawn.begin()
    out = list(drawn.documents(a, ["x", "y", "x"])) + list(drawn.documents(b, ["y", "zz"]))
    drawn.end()
    assert out == ["x", "y", "zz"]
    record = lineage["training_data"]
    assert record["duplicates_dropped"] == 2
    assert [(r["documents"], r["trained_documents"], r["trained_bytes"]) for r in record["corpora"]] == [(3, 2, 2), (2, 1, 2)]
    assert record["languages"] == {"en": {"trained_bytes": 2, "share": 0.5}, "hi": {"trained_bytes": 2, "share": 0.5}}


def test_weighted_spills_are_added_then_rounded_and_pruned():
    english = [(b"a", 10), (b"b", 3)]
    hindi = [(b"b", 4), (b"c", 1)]
    merged = list(spills.merged([spills.weighted(english, 0.5), spills.weighted(hindi, 2.0)], min_count=2))
    assert merged == [(b"a", 5), (b"b", 10), (b"c", 2)]
    assert list(spills.merged([spills.weighted(english, 0.1)], min_count=1)) == [(b"a", 1)]


def test_weights_must_name_exactly_the_training_corpora():
    a, b = CORPORA[:2]
    assert weights_refusal(MixtureSpec(weights={str(a.id): 1, str(b.id): 0}), [a, b]) is None
    assert "not one of train_corpora" in weights_refusal(MixtureSpec(weights={str(a.id): 1, "x": 1}), [a])
    assert "no weight to training corpus 'de'" in weights_refusal(MixtureSpec(weights={str(a.id): 1}), [a, b])
    assert weights_refusal(MixtureSpec(weights={str(a.id): 0, "x": 1}), [a]) is not None


def test_corpus_ids_are_read_however_they_were_written():
    key = str(CORPORA[0].id)
    assert MixtureSpec(weights={key.upper(): 1}).weights == {key: 1}


@pytest.mark.parametrize("mixture, why", [
    ({"weights": {"a": -1}}, "weights must be numbers from 0 to 1e9: 'a' has -1"),
    ({"weights": {"a": 0, "b": 0}}, "at least one weight must be above 0"),
    ({"weights": {"a": float("nan")}}, "'a' has nan"),
    ({}, 'give either "weights" or "language_temperature"'),
    ({"weights": {"a": 1}, "language_temperature": 0.3}, 'give either "weights" or "language_temperature"'),
    ({"language_temperature": 1.5}, "less than or equal to 1"),
    ({"language_temperature": 0.3, "max_repeats": 0.5}, "greater than or equal to 1"),
    ({"language_temperature": 0.3, "bananas": 1}, "Extra inputs"),
])
def test_bad_mixtures_are_refused_naming_spec_mixture(mixture, why):
    with pytest.raises(InvalidInput) as caught:
        resolve_spec({"library": "tokenmill", "vocab_size": 300, "mixture": mixture})
    assert caught.value.field.startswith("spec.mixture") and why in str(caught.value), str(caught.value)


@pytest.mark.parametrize("spec, field", [
    ({"mixture": {"language_temperature": 0.3}, "max_sentences": 100}, "spec.mixture"),
    ({"deduplicate": True, "parity": True}, "spec.deduplicate"),
])
def test_combinations_a_mixture_cannot_keep_are_refused(spec, field):
    with pytest.raises(InvalidInput) as caught:
        resolve_spec({"vocab_size": 300, **spec})
    assert caught.value.field == field, str(caught.value)


def test_a_mixture_given_as_json_text_is_read_as_its_object():
    spec = TrainingSpec.model_validate({"mixture": '{"language_temperature": 0.3}'})
    assert spec.mixture == MixtureSpec(language_temperature=0.3)
