"""Subword sampling in a real browser, on a version the stack's worker trained with recorded sampling
defaults: the playground's Sample box, dropout and seed (with script: as you change them; Next
seed), the same ids as the API's sampled encode, the form without script, and the version's files
(manifest.json's defaults, tokenizer.dropout.json)."""

import uuid

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import screenshot, sign_in
from tests.services import FIXTURES
from tests.waiting import finished

LINES = 150
SPEC = {"vocab_size": 600, "sampling": {"dropout": 0.2, "seed": 5, "dropout_file": True}}


@pytest.fixture(scope="module")
def version(stack, team):
    """(name, number) of a byte-level BPE version trained with sampling defaults."""
    import httpx

    with (FIXTURES / "parallel_flores200_dev" / "eng_Latn.txt").open("rb") as handle:
        data = b"".join(next(handle) for _ in range(LINES))
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {team.key}"}, timeout=120) as api:
        corpus = api.post("/v1/corpora", data={"name": f"sampling-{uuid.uuid4().hex[:6]}", "domain": "news",
                                               "language": "eng_Latn"}, files={"file": ("en.txt", data)})
        assert corpus.status_code == 201, corpus.text
        name = f"sampling-{uuid.uuid4().hex[:6]}"
        job = api.post("/v1/jobs", json={"tokenizer": name, "spec": SPEC, "train_corpora": [corpus.json()["id"]]})
        assert job.status_code == 202, job.text
        done = finished(api, f"/v1/jobs/{job.json()['id']}")
        assert done["status"] == "succeeded", done
        return name, done["version"]


def sampled_ids(api, name, number, text, **sampling):
    response = api.post(f"/v1/tokenizers/{name}/versions/{number}/encode", json={"text": text, "sampling": sampling})
    assert response.status_code == 200, response.text
    return response.json()["ids"]


def shown_ids(page):
    return page.locator("#pg-main .tok").evaluate_all("boxes => boxes.map(b => Number(b.dataset.id))")


def test_the_versions_files_record_the_sampling_defaults(api, version):
    name, number = version
    base = f"/v1/tokenizers/{name}/versions/{number}"
    assert api.get(base).json()["spec"]["sampling"] == {**SPEC["sampling"], "alpha": None, "nbest_size": None}
    manifest = api.get(f"{base}/files/manifest.json").json()
    assert manifest["spec"]["sampling"]["dropout"] == 0.2
    assert "tokenizer.dropout.json" in {f["name"] for f in manifest["files"]}
    assert api.get(f"{base}/files/tokenizer.dropout.json").json()["model"]["dropout"] == 0.2
    assert api.get(f"{base}/files/tokenizer.json").json()["model"]["dropout"] is None
    assert manifest["tiktoken"]["file"] == "tokenizer.tiktoken"  # the plain tokenizer.json still has its rank file


def test_the_playground_samples_as_the_controls_change(browse, team, api, version):
    name, number = version
    page, console = browse(key=team.key)
    console.allow(422, "/playground/encode")  # the dropout of 2 below
    page.goto(f"/tokenizers/{name}/versions/{number}")
    text = page.get_by_label("Text to tokenize").input_value()
    expect(page.locator("#pg-main .tok").first).to_be_visible()
    plain = shown_ids(page)
    # The recorded defaults fill the boxes.
    expect(page.get_by_label("Seed")).to_have_value("5")
    page.get_by_label("Sample one segmentation").check()
    note = page.locator("#pg-main .sampling-note")
    expect(note).to_have_text("Sampled with BPE-dropout, p = 0.2, seed 5")
    assert shown_ids(page) == sampled_ids(api, name, number, text, dropout=0.2, seed=5) != plain
    page.get_by_role("spinbutton", name="Dropout").fill("0.5")
    expect(note).to_contain_text("p = 0.5, seed 5")
    assert shown_ids(page) == sampled_ids(api, name, number, text, dropout=0.5, seed=5)
    page.get_by_role("button", name="Next seed").click()
    expect(note).to_contain_text("seed 6")
    expect(page.get_by_label("Seed")).to_have_value("6")
    assert shown_ids(page) == sampled_ids(api, name, number, text, dropout=0.5, seed=6)
    assert "sample=on" in page.url and "seed=6" in page.url
    screenshot(page, "playground-sampling", full_page=False)
    page.get_by_role("spinbutton", name="Dropout").fill("2")
    expect(page.locator("#pg-error")).to_contain_text("sampling.dropout")
    page.get_by_role("spinbutton", name="Dropout").fill("0.5")
    page.get_by_label("Sample one segmentation").uncheck()
    expect(note).to_have_count(0)
    assert shown_ids(page) == plain


def test_the_playground_samples_without_script(browser, stack, team, api, version):
    name, number = version
    context = browser.new_context(base_url=stack, java_script_enabled=False)
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        sign_in(page, team.key)
        page.goto(f"/tokenizers/{name}/versions/{number}")
        page.get_by_label("Text to tokenize").fill("Sampling without script works too.")
        page.get_by_label("Sample one segmentation").check()
        page.get_by_label("Seed").fill("40")
        page.get_by_role("button", name="Tokenize").click()
        expect(page.locator("#pg-main .sampling-note")).to_have_text("Sampled with BPE-dropout, p = 0.2, seed 40")
        text = "Sampling without script works too."
        assert shown_ids(page) == sampled_ids(api, name, number, text, dropout=0.2, seed=40)
        page.get_by_role("button", name="Next seed").click()
        expect(page.locator("#pg-main .sampling-note")).to_contain_text("seed 41")
        assert shown_ids(page) == sampled_ids(api, name, number, text, dropout=0.2, seed=41)
        assert "reseed=41" in page.url
    finally:
        context.close()
