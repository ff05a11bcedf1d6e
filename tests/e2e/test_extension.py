"""Extending a reference on the real stack (issue 21.2): the job learns new merges after gpt2's,
its files keep every gpt2 id, and its evaluation shows the gain beside gpt2's."""

import io
import tarfile

import tiktoken

from tests.e2e.test_evaluations import upload_head
from tests.e2e.test_walking_skeleton import wait_for_job
from tests.services import FIXTURES
from tests.stack import unique
from tokenmill.evaluation.references import load_reference
from tokenmill.training.tiktoken_format import parse_rank_file

FLORES = FIXTURES / "parallel_flores200_dev"


def test_gpt2_extended_with_hindi_keeps_its_ids(http):
    hindi = upload_head(http, FLORES / "hin_Deva.txt", 400, name="hi", domain="news", language="hin_Deva")
    name = unique("gpt2-hi")
    job = http.post("/v1/jobs", json={"tokenizer": name, "train_corpora": [hindi["id"]],
                                      "spec": {"vocab_size": 50257 + 400, "base": {"reference": "gpt2"}}})
    assert job.status_code == 202, job.text
    done = wait_for_job(http, job.json()["id"])
    assert done["status"] == "succeeded", done
    assert any("extends reference gpt2" in note and "400 merges" in note for note in done["notes"])
    raw = http.get(f"/v1/tokenizers/{name}/versions/1/bundle.tar.gz").content
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        files = {m.name.split("/")[-1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    ranks = parse_rank_file(files["tokenizer.tiktoken"])
    gpt2 = load_reference("gpt2")
    assert all(ranks[token] == rank for token, rank in gpt2._mergeable_ranks.items())
    extended = tiktoken.Encoding("x", pat_str=gpt2._pat_str, mergeable_ranks=ranks, special_tokens=gpt2._special_tokens)
    english = "The boy plays football in the garden every afternoon."
    assert extended.encode(english) == gpt2.encode(english)
    items = http.get(f"/v1/tokenizers/{name}/versions/1/evaluations").json()["items"]
    mine = next(i for i in items if i["corpus_id"] == hindi["id"])["metrics"]
    reference = http.get("/v1/dashboard/fertility", params={"tokenizer": name}).json()
    gpt2_row = next(r for r in reference["rows"] if r["label"] == "gpt2")
    assert mine["fertility"] < 0.8 * gpt2_row["domains"]["news"]["fertility"]
