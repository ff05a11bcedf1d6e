"""POST /v1/jobs refuses out-of-bound specs with a 422 naming the field, and queues nothing.

Bodies are sent as ASCII JSON (lone surrogates as \\u escapes, which a client may well send)
and kept under 1 MiB, the API's cap on JSON bodies: the spec's own limits must refuse first.
"""

import io
import json
import math

import pytest

PROBLEM = "application/problem+json"
JSON_BODY_CAP = 1024**2


@pytest.fixture
def corpus_id(api):
    response = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "eng_Latn"},
                        files={"file": ("c.txt", io.BytesIO(b"some text here\nand more text\n"))})
    return response.json()["id"]


def submit(api, corpus_id, spec: dict):
    body = json.dumps({"tokenizer": "tok", "spec": spec, "train_corpora": [corpus_id]})  # ASCII: \ud800 escaped
    assert len(body) < JSON_BODY_CAP
    return api.post("/v1/jobs", content=body, headers={"Content-Type": "application/json"})


@pytest.mark.parametrize(("spec", "field"), [
    ({"special_tokens": [f"<t{i}>" for i in range(5000)]}, "spec.special_tokens"),  # ~50 KB of JSON
    ({"special_tokens": ["<s>", "x" * 10_000]}, "spec.special_tokens"),
    ({"special_tokens": ["<s>", "nul\x00"]}, "spec.special_tokens"),
    ({"special_tokens": ["\ud800"]}, "spec.special_tokens"),
    ({"min_frequency": 1e23}, "spec.min_frequency"),
    ({"min_frequency": 10**30}, "spec.min_frequency"),
    ({"max_sentences": 1e18}, "spec.max_sentences"),
    ({"seed": 1e23}, "spec.seed"),
    ({"character_coverage": math.nan}, "spec.character_coverage"),
    ({"pre_tokenizer": "none", "pre_tokenizer_regex": "\\w+\x00"}, "spec.pre_tokenizer_regex"),
    ({"pre_tokenizer": "none", "pre_tokenizer_regex": "\\w+|\udc80"}, "spec.pre_tokenizer_regex"),
    ({"byte_level": False, "pre_tokenizer": "whitespace", "end_of_word_suffix": "\x00"}, "spec.end_of_word_suffix"),
])
def test_out_of_bound_spec_is_a_422_naming_the_field(api, corpus_id, spec, field):
    before = api.get("/v1/jobs").json()["total"]
    response = submit(api, corpus_id, spec)
    assert response.status_code == 422, response.text[:500]
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["field"] == field
    assert len(response.text) < 1000  # the refusal does not echo the input
    assert api.get("/v1/jobs").json()["total"] == before


def test_a_spec_at_the_limits_is_queued(api, corpus_id):
    spec = {"special_tokens": [f"<t{i}>" for i in range(1000)], "vocab_size": 32000, "min_frequency": 2**31 - 1}
    response = submit(api, corpus_id, spec)
    assert response.status_code == 202, response.text[:500]
    assert len(response.json()["spec"]["special_tokens"]) == 1000
