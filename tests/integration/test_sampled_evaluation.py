"""Evaluation on a seeded sample of documents (tokenmill.evaluation.measuring): the same documents
for every subject, recorded with the evaluation, and a 95% interval that covers the whole corpus's value."""

import pytest

from tests.conftest import make_team
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.evaluation.encoders import reference_encoder
from tokenmill.evaluation.measuring import evaluation_documents, measure, sample_record, sample_share

LIMITS = {"max_bytes": 10**8, "max_line_bytes": 10**6}


@pytest.fixture(scope="module")
def corpus(sessionmaker, store):
    team, _ = make_team(sessionmaker)
    text = "\n".join(flores_lines(400, languages=("eng_Latn", "deu_Latn", "fra_Latn"))).encode()
    return ingest_corpus(sessionmaker, store, team, CorpusFields("mix", "news", "eng_Latn"), [text], **LIMITS)


def test_small_corpora_are_measured_whole(corpus):
    assert sample_share(corpus, 0) == 1.0 and sample_share(corpus, corpus.bytes) == 1.0
    assert sample_share(corpus, corpus.bytes // 4) == pytest.approx(0.25, rel=0.01)
    assert sample_record(1.0)["whole"] is True


def test_every_subject_is_measured_on_the_same_documents(corpus, store):
    share = sample_share(corpus, corpus.bytes // 3)
    first = list(evaluation_documents(store, corpus, share))
    again = list(evaluation_documents(store, corpus, share))
    assert first == again
    assert 0.2 < len(first) / corpus.lines < 0.45
    gpt2 = measure(reference_encoder("gpt2"), evaluation_documents(store, corpus, share))
    o200k = measure(reference_encoder("o200k_base"), evaluation_documents(store, corpus, share))
    assert gpt2["documents"] == o200k["documents"] == len(first)
    assert gpt2["words"] == o200k["words"] and gpt2["characters"] == o200k["characters"]


@pytest.mark.parametrize("name", ["gpt2", "cl100k_base"])
def test_the_interval_of_a_sample_covers_the_whole_corpus(corpus, store, name):
    whole = measure(reference_encoder(name), evaluation_documents(store, corpus, 1.0))
    sampled = measure(reference_encoder(name), evaluation_documents(store, corpus, sample_share(corpus, corpus.bytes // 4)))
    assert sampled["documents"] < whole["documents"]
    for metric in ("fertility", "chars_per_token"):
        assert sampled[f"{metric}_ci95"] > 0
        assert abs(sampled[metric] - whole[metric]) <= sampled[f"{metric}_ci95"], metric
