"""Evaluations through the HTTP API and the worker: after training, on request, in the dashboard."""


import pytest
from tokenizers import Tokenizer

from tests.e2e.test_walking_skeleton import wait_for_job
from tests.services import CORPORA, FIXTURES
from tests.stack import unique
from tests.waiting import finished
from tokenmill.evaluation.references import load_reference


def upload_head(http, path, n, **fields):
    with path.open("rb") as handle:
        data = b"".join(next(handle) for _ in range(n))
    return http.post("/v1/corpora", data=fields, files={"file": (path.name, data)}).json()


def wait_for_run(http, run_id, timeout=120):
    return finished(http, f"/v1/evaluations/{run_id}", timeout)


def test_evaluations_dashboard_and_playground(http, tmp_path):
    flores = FIXTURES / "parallel_flores200_dev"
    group = unique("flores")
    en = upload_head(http, flores / "eng_Latn.txt", 200, name="en", domain="news", language="eng_Latn", parallel_group=group)
    de = upload_head(http, flores / "deu_Latn.txt", 200, name="de", domain="news", language="deu_Latn", parallel_group=group)
    name = unique("evalbpe")
    job = http.post("/v1/jobs", json={"tokenizer": name, "spec": {"vocab_size": 1500},
                                      "train_corpora": [en["id"], de["id"]]}).json()
    assert wait_for_job(http, job["id"])["status"] == "succeeded"

    items = http.get(f"/v1/tokenizers/{name}/versions/1/evaluations").json()["items"]
    assert {i["corpus_id"] for i in items} == {en["id"], de["id"]}
    german = next(i for i in items if i["language"] == "deu_Latn")
    english = next(i for i in items if i["language"] == "eng_Latn")
    assert german["metrics"]["premium"] == pytest.approx(german["metrics"]["tokens"] / english["metrics"]["tokens"])

    matrix = http.get("/v1/dashboard/fertility", params={"tokenizer": name}).json()
    row = next(r for r in matrix["rows"] if r["label"] == f"{name} v1")
    total = sum(i["metrics"]["tokens"] for i in items) / sum(i["metrics"]["words"] for i in items)
    assert row["domains"]["news"]["fertility"] == pytest.approx(total)
    assert all(r["domains"].get("news") for r in matrix["rows"] if r["kind"] == "reference")

    run = http.post("/v1/evaluations", json={"reference": "o200k_base", "corpora": [en["id"]]})
    assert run.status_code == 202
    done = wait_for_run(http, run.json()["id"])
    assert done["status"] == "succeeded" and done["results"][0]["corpus_id"] == en["id"]
    assert done["results"][0]["metrics"]["tokens"] > 0
    again = wait_for_run(http, http.post("/v1/evaluations", json={"tokenizer": name, "version": 1}).json()["id"])
    assert {r["corpus_id"] for r in again["results"]} == {en["id"], de["id"]}
    assert next(r for r in again["results"] if r["corpus_id"] == en["id"])["metrics"]["tokens"] == english["metrics"]["tokens"]
    statistics = http.get(f"/v1/corpora/{en['id']}").json()["statistics"]  # computed by the worker after upload
    assert statistics["distinct_words"] > 1000 and 0 < statistics["hapax_share"] < 1
    assert 0.3 < statistics["heaps_beta"] < 1 and statistics["zipf_exponent"] > 0.5
    bad = http.post("/v1/evaluations", json={"reference": "gpt5"})
    assert bad.status_code == 422 and bad.json()["field"] == "reference"

    text = "Der Junge spielt im Garten. 東京 👋🏽"
    encoded = http.post(f"/v1/tokenizers/{name}/versions/1/encode", json={"text": text}).json()
    (tmp_path / "t.json").write_bytes(http.get(f"/v1/tokenizers/{name}/versions/1/files/tokenizer.json").content)
    assert encoded["ids"] == Tokenizer.from_file(str(tmp_path / "t.json")).encode(text, add_special_tokens=False).ids
    spanish = "El niño juega en el jardín."
    reference = http.post("/v1/references/o200k_base/encode", json={"text": spanish}).json()
    assert reference["count"] == 7  # the first article's count
    assert reference["ids"] == load_reference("o200k_base").encode_ordinary(spanish)


def test_a_large_corpus_is_measured_by_worker_processes_of_the_celery_worker(http):
    """Past 16 batches a corpus is measured by shard processes that the Celery worker's child
    starts (not multiprocessing: a daemonic child may not); the numbers equal tiktoken's own."""
    from tokenmill.corpora.words import count_words
    from tokenmill.evaluation.measuring import BATCH_LINES, SHARD_AFTER

    path = CORPORA / "manpages" / "eng_Latn.txt"
    with path.open(encoding="utf-8") as handle:
        head = [next(handle) for _ in range(BATCH_LINES * SHARD_AFTER + 4000)]
    documents = [line.rstrip("\n") for line in head if line.strip()]
    assert len(documents) > BATCH_LINES * SHARD_AFTER and not any("\r" in d for d in documents)
    corpus = http.post("/v1/corpora", data={"name": unique("man"), "domain": "manpages", "language": "eng_Latn"},
                       files={"file": ("man.txt", "".join(head).encode())}).json()
    run = wait_for_run(http, http.post("/v1/evaluations", json={"reference": "gpt2", "corpora": [corpus["id"]]}).json()["id"])
    assert run["status"] == "succeeded"
    metrics = run["results"][0]["metrics"]
    gpt2 = load_reference("gpt2")
    assert metrics["encoded_by"] == "tiktoken"
    assert metrics["tokens"] == sum(len(gpt2.encode_ordinary(d)) for d in documents)
    assert metrics["characters"] == sum(map(len, documents))
    assert metrics["words"] == sum(count_words(d) for d in documents)
    assert metrics["roundtrip_rate"] == 1.0
