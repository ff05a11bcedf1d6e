"""Extending a reference on the real stack (issue 21.2): the job learns new merges after gpt2's,
its files keep every gpt2 id, and its evaluation shows the gain beside gpt2's."""

import io
import re
import tarfile

import httpx
import tiktoken

from tests.api.dashboard import sign_in
from tests.e2e.test_evaluations import upload_head
from tests.e2e.test_walking_skeleton import wait_for_job
from tests.services import FIXTURES
from tests.stack import unique
from tokenmill.evaluation.references import load_reference
from tokenmill.formats.tiktoken_format import parse_rank_file

FLORES = FIXTURES / "parallel_flores200_dev"


def test_gpt2_extended_with_hindi_keeps_its_ids(http, stack, team_key):
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
    # The version page names its base, diffs against it and lists what it added (issue 21.4).
    page = signed_in_page(stack, team_key[1], f"/tokenizers/{name}/versions/1")
    assert re.search(r'id="version-base">reference gpt2: 400 merges from id 50,257<', page), page[:2000]
    assert "Changes from its base, reference gpt2" in page
    assert _count(page, "diff-added-count") == 400 and _count(page, "diff-removed-count") == 0
    assert _count(page, "added-count") == 400
    first = re.search(r'id="added-first"><li><code title="id (\d+):', page)
    assert first and int(first.group(1)) == 50257


def test_a_teams_version_extended_has_its_base_linked_and_diffed(http, stack, team_key):
    english = upload_head(http, FLORES / "eng_Latn.txt", 300, name="en", domain="news", language="eng_Latn")
    hindi = upload_head(http, FLORES / "hin_Deva.txt", 300, name="hi", domain="news", language="hin_Deva")
    name = unique("own")
    first = http.post("/v1/jobs", json={"tokenizer": name, "train_corpora": [english["id"]],
                                        "spec": {"library": "tokenmill", "vocab_size": 600}})
    assert wait_for_job(http, first.json()["id"])["status"] == "succeeded"
    second = http.post("/v1/jobs", json={"tokenizer": name, "train_corpora": [hindi["id"]],
                                         "spec": {"vocab_size": 700, "base": {"tokenizer": name, "version": 1}}})
    assert second.status_code == 202, second.text
    assert wait_for_job(http, second.json()["id"])["status"] == "succeeded"
    page = signed_in_page(stack, team_key[1], f"/tokenizers/{name}/versions/2")
    assert f'<a href="/tokenizers/{name}/versions/1">{name} v1</a>: 100 merges from id 600' in page, page[:3000]
    assert _count(page, "diff-added-count") == 100 and _count(page, "diff-removed-count") == 0
    assert _count(page, "added-count") == 100


def signed_in_page(stack: str, key: str, path: str) -> str:
    with httpx.Client(base_url=stack, timeout=60) as browser:
        sign_in(browser, key)
        page = browser.get(path)
    assert page.status_code == 200, page.text[:500]
    return page.text


def _count(page: str, element: str) -> int:
    found = re.search(rf'id="{element}">([\d,]+)<', page)
    assert found, element
    return int(found.group(1).replace(",", ""))



def test_a_sentencepiece_model_extended_keeps_its_pieces_and_ids(http, stack, team_key):
    import sentencepiece as spm

    from tests.text import flores_lines
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.with_sentencepiece import train_sentencepiece

    spec = resolve_spec({"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 600})
    base = train_sentencepiece(spec, flores_lines(400, languages=("eng_Latn",))).model
    name = unique("sp")
    imported = http.post(f"/v1/tokenizers/{name}/versions", files={"file": ("tokenizer.model", base)})
    assert imported.status_code == 201, imported.text
    hindi = upload_head(http, FLORES / "hin_Deva.txt", 400, name="hi", domain="news", language="hin_Deva")
    job = http.post("/v1/jobs", json={"tokenizer": name, "train_corpora": [hindi["id"]],
                                      "spec": {"vocab_size": 900, "base": {"tokenizer": name}}})
    assert job.status_code == 202, job.text
    done = wait_for_job(http, job.json()["id"])
    assert done["status"] == "succeeded", done
    version = http.get(f"/v1/tokenizers/{name}/versions/2").json()
    assert version["spec"]["library"] == "sentencepiece" and version["vocab_size"] == 900
    assert version["lineage"]["base"]["first_new_id"] == 600 and version["lineage"]["base"]["pieces_added"] == 300
    model = http.get(f"/v1/tokenizers/{name}/versions/2/files/tokenizer.model").content
    before, after = spm.SentencePieceProcessor(model_proto=base), spm.SentencePieceProcessor(model_proto=model)
    assert [after.id_to_piece(i) for i in range(600)] == [before.id_to_piece(i) for i in range(600)]
    english = "The boy plays football in the garden every afternoon."
    assert after.encode(english) == before.encode(english)
    page = signed_in_page(stack, team_key[1], f"/tokenizers/{name}/versions/2")
    assert f"{name} v1</a>: 300 pieces from id 600" in page
    assert any("300 pieces learned on the training corpora" in note for note in done["notes"]), done["notes"]
