"""An evaluation as the API gives it: what encoded the corpus is `encoded_by`, for rows
measured before that key was renamed from `engine` too."""

import uuid

import pytest

from tokenmill.db import utcnow
from tokenmill.evaluation.reports import evaluation_out
from tokenmill.models import Corpus, Evaluation


@pytest.mark.parametrize("stored_key", ["encoded_by", "engine"])
def test_what_encoded_the_corpus_is_encoded_by(stored_key):
    corpus = Corpus(id=uuid.uuid4(), name="news-en", domain="news", language="en", parallel_group=None)
    row = Evaluation(id=uuid.uuid4(), reference="gpt2", word_rule="spaces", created_at=utcnow(),
                     metrics={"tokens": 12, stored_key: "tiktoken"})
    out = evaluation_out(row, corpus, premium_value=1.25)
    assert out["metrics"] == {"tokens": 12, "encoded_by": "tiktoken", "premium": 1.25}
    assert row.metrics == {"tokens": 12, stored_key: "tiktoken"}  # the stored row is left as it is
