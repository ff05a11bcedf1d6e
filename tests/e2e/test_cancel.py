"""Cancelling a running job: it ends cancelled, and no version appears."""

from tests.e2e.test_walking_skeleton import multilingual_corpus, submit, wait_for_job
from tests.stack import unique
from tests.waiting import until


def test_cancel_while_running_leaves_no_version(http):
    corpus = http.post("/v1/corpora", data={"name": "slow", "domain": "news", "language": "mul"},
                       files={"file": ("slow.txt", multilingual_corpus(400))}).json()
    name = unique("cancel")
    job = http.post("/v1/jobs", json={"tokenizer": name, "spec": {"algorithm": "unigram", "vocab_size": 5000},
                                      "train_corpora": [corpus["id"]], "eval_corpora": [corpus["id"]]}).json()
    until(lambda: http.get(f"/v1/jobs/{job['id']}").json(), lambda job: job["status"] != "queued", 60, every=0.2)
    cancelled = http.post(f"/v1/jobs/{job['id']}/cancel").json()
    assert cancelled["status"] == "cancelled"
    # The worker runs one job at a time: once a later job is done, the cancelled one has ended too.
    later = wait_for_job(http, submit(http, unique("after"), corpus["id"], vocab_size=400).json()["id"])
    assert later["status"] == "succeeded"
    final = http.get(f"/v1/jobs/{job['id']}").json()
    assert (final["status"], final["version"]) == ("cancelled", None)
    assert http.get(f"/v1/tokenizers/{name}/versions").status_code == 404
    assert http.post(f"/v1/jobs/{later['id']}/cancel").status_code == 409
