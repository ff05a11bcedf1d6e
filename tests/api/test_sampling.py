"""Subword sampling through the app: POST …/encode with `sampling` (seeded BPE-dropout and Unigram
sampling, the version's recorded defaults, 422s that name the field) and the version page's
playground without script (GET form) and with it (POST /playground/encode)."""

import re

import pytest
from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import version_contents
from tokenmill.training.with_sentencepiece import train_sentencepiece

PROBLEM = "application/problem+json"
LINES = flores_lines(80, languages=("eng_Latn", "spa_Latn"))
TEXT = "The government announced new measures. El gobierno anunció nuevas medidas para los niños."


def version(sessionmaker, store, team, name: str, **spec) -> None:
    resolved = resolve_spec({"vocab_size": 600, **spec})
    if resolved.library == "sentencepiece":
        result = train_sentencepiece(resolved, LINES)
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_str(result.tokenizer_json)
        files = version_contents(resolved, tokenizer, {"tokenizer.model": result.model, "tokenizer.vocab": result.vocab}, {})
    else:
        tokenizer = with_tokenizers.train(resolved, LINES)
        files, _ = artifact_files(resolved, tokenizer)
    add_version(sessionmaker, store, team, name, resolved, files, tokenizer.get_vocab_size())


@pytest.fixture(scope="module")
def team(sessionmaker, store):
    """A team with byte-level BPE (dropout 0.3 recorded), a plain one, a Unigram, a sentencepiece
    Unigram and a WordPiece version."""
    row, key = make_team(sessionmaker)
    version(sessionmaker, store, row, "bpe", sampling={"dropout": 0.3, "seed": 7})
    version(sessionmaker, store, row, "plain")
    version(sessionmaker, store, row, "uni", algorithm="unigram", byte_level=False, pre_tokenizer="metaspace",
            byte_fallback=True)
    version(sessionmaker, store, row, "spm", library="sentencepiece", algorithm="unigram", vocab_size=1500,
            byte_fallback=True, sampling={"alpha": 0.2, "nbest_size": -1})
    version(sessionmaker, store, row, "wp", algorithm="wordpiece")
    return row, key


@pytest.fixture
def api(app_client, team):
    app_client.headers["Authorization"] = f"Bearer {team[1]}"
    yield app_client
    app_client.headers.pop("Authorization", None)


def encode(api, name: str, **body):
    return api.post(f"/v1/tokenizers/{name}/versions/1/encode", json={"text": TEXT, **body})


def test_a_sampled_encode_is_seeded_and_reports_how_it_sampled(api):
    best = encode(api, "plain").json()
    assert "sampling" not in best
    first = encode(api, "plain", sampling={"dropout": 0.2, "seed": 1}).json()
    assert first["sampling"] == {"method": "bpe-dropout", "dropout": 0.2, "seed": 1}
    assert encode(api, "plain", sampling={"dropout": 0.2, "seed": 1}).json()["ids"] == first["ids"]
    assert encode(api, "plain", sampling={"dropout": 0.2, "seed": 2}).json()["ids"] != first["ids"]
    assert first["ids"] != best["ids"] and first["count"] > best["count"]
    assert "".join(first["pieces"]) == TEXT  # byte-level: the offsets cover the text in order
    assert encode(api, "plain", sampling={"dropout": 0, "seed": 5}).json()["ids"] == best["ids"]


def test_an_empty_sampling_takes_the_versions_recorded_defaults_then_ours(api):
    assert encode(api, "bpe", sampling={}).json()["sampling"] == {"method": "bpe-dropout", "dropout": 0.3, "seed": 7}
    assert encode(api, "bpe", sampling={"seed": 8}).json()["sampling"]["dropout"] == 0.3
    assert encode(api, "plain", sampling={}).json()["sampling"] == {"method": "bpe-dropout", "dropout": 0.1, "seed": 0}
    assert encode(api, "spm", sampling={"seed": 3}).json()["sampling"] == {
        "method": "unigram", "alpha": 0.2, "nbest_size": -1, "seed": 3}


@pytest.mark.parametrize("name", ["uni", "spm"])
def test_unigram_versions_sample_with_alpha_and_nbest(api, name):
    best = encode(api, name).json()
    runs = [encode(api, name, sampling={"alpha": 0.1, "nbest_size": nbest, "seed": seed}).json()
            for nbest in (-1, 8) for seed in (1, 2)]
    assert len({tuple(r["ids"]) for r in runs}) > 1
    assert all(r["ids"] != best["ids"] for r in runs[:2])
    assert encode(api, name, sampling={"alpha": 0.1, "nbest_size": 8, "seed": 2}).json()["ids"] == runs[3]["ids"]


@pytest.mark.parametrize("name, sampling, field", [
    ("plain", {"dropout": 1}, "sampling.dropout"),
    ("plain", {"dropout": -0.01}, "sampling.dropout"),
    ("plain", {"dropout": "a lot"}, "sampling.dropout"),
    ("plain", {"seed": -1}, "sampling.seed"),
    ("plain", {"seed": 2**31}, "sampling.seed"),
    ("uni", {"alpha": 0}, "sampling.alpha"),
    ("uni", {"alpha": 11}, "sampling.alpha"),
    ("uni", {"nbest_size": 0}, "sampling.nbest_size"),
    ("uni", {"nbest_size": 65}, "sampling.nbest_size"),
    ("uni", {"nbest_size": -2}, "sampling.nbest_size"),
    ("plain", {"temperature": 2}, "sampling.temperature"),
    ("plain", {"alpha": 0.1}, "sampling.alpha"),
    ("uni", {"dropout": 0.1}, "sampling.dropout"),
    ("wp", {}, "sampling"),
])
def test_bad_sampling_options_are_a_422_naming_the_field(api, name, sampling, field):
    response = encode(api, name, sampling=sampling)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.json()["field"] == field


def test_the_spec_refuses_sampling_that_does_not_fit_before_queuing(api):
    corpus = api.post("/v1/corpora", data={"name": "c", "domain": "news", "language": "en"},
                      files={"file": ("c.txt", b"a few words\n")}).json()["id"]
    for spec, field in (({"sampling": {"alpha": 0.1}}, "spec.sampling.alpha"),
                        ({"algorithm": "wordpiece", "sampling": {"dropout": 0.1}}, "spec.sampling"),
                        ({"sampling": {"dropout": 2}}, "spec.sampling.dropout")):
        response = api.post("/v1/jobs", json={"tokenizer": "t", "spec": spec, "train_corpora": [corpus]})
        assert response.status_code == 422 and response.json()["field"] == field, response.text


# ---- the playground --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser(app_client, team):
    client = TestClient(app_client.app, follow_redirects=False)
    token = sign_in(client, team[1])
    return client, token


def main_panel(html: str) -> str:
    return html.split('id="pg-main"')[1].split('id="pg-other"')[0]


def panel_ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'data-id="(\d+)"', main_panel(html))]


def test_the_playground_form_samples_without_script(browser, api):
    client, _ = browser
    page = client.get("/tokenizers/bpe/versions/1")
    assert page.status_code == 200
    form = page.text.split('id="pg-sampling"')[1].split("</fieldset>")[0]
    # The recorded defaults fill the boxes; the box is not ticked until asked.
    assert 'name="dropout"' in form and 'value="0.3"' in form and 'name="seed"' in form and 'value="7"' in form
    assert 'id="pg-sample" name="sample" value="on">' in form and 'name="alpha"' not in form
    sampled = client.get("/tokenizers/plain/versions/1", params={"text": TEXT, "sample": "on", "dropout": "0.4",
                                                                 "seed": "3", "compare": "version:plain@1"})
    assert sampled.status_code == 200
    expected = encode(api, "plain", sampling={"dropout": 0.4, "seed": 3}).json()["ids"]
    assert panel_ids(sampled.text) == expected
    assert "Sampled with BPE-dropout, p = 0.4, seed 3" in main_panel(sampled.text)
    # The comparison stays the plain encode; the box stays ticked.
    other = sampled.text.split('id="pg-other"')[1].split("</div>\n  </div>")[0]
    assert [int(i) for i in re.findall(r'data-id="(\d+)"', other)] == encode(api, "plain").json()["ids"]
    assert 'name="sample" value="on" checked' in sampled.text
    # "Next seed" submits reseed=4: a sampled encode with seed 4.
    assert 'name="reseed" value="4"' in sampled.text
    reseeded = client.get("/tokenizers/plain/versions/1", params={"text": TEXT, "dropout": "0.4", "seed": "3",
                                                                  "reseed": "4"})
    assert panel_ids(reseeded.text) == encode(api, "plain", sampling={"dropout": 0.4, "seed": 4}).json()["ids"]
    unticked = client.get("/tokenizers/plain/versions/1", params={"text": TEXT, "dropout": "0.4", "seed": "3"})
    assert panel_ids(unticked.text) == encode(api, "plain").json()["ids"]


def test_a_unigram_playground_has_alpha_and_nbest_and_wordpiece_none(browser, api):
    client, _ = browser
    page = client.get("/tokenizers/spm/versions/1", params={"text": TEXT, "sample": "on", "alpha": "0.2",
                                                            "nbest_size": "4", "seed": "9"})
    assert 'name="alpha"' in page.text and 'name="nbest_size"' in page.text and 'name="dropout"' not in page.text
    expected = encode(api, "spm", sampling={"alpha": 0.2, "nbest_size": 4, "seed": 9}).json()["ids"]
    assert panel_ids(page.text) == expected
    wordpiece = client.get("/tokenizers/wp/versions/1").text
    assert 'id="pg-sampling"' not in wordpiece and 'id="pg-no-sampling"' in wordpiece


@pytest.mark.parametrize("params, field", [({"dropout": "1.5"}, "sampling.dropout"), ({"seed": "-3"}, "sampling.seed"),
                                           ({"dropout": "lots"}, "sampling.dropout")])
def test_a_bad_sampling_control_is_the_playgrounds_422(browser, params, field):
    client, _ = browser
    page = client.get("/tokenizers/plain/versions/1", params={"text": TEXT, "sample": "on", **params})
    assert page.status_code == 422
    assert f"&#39;{field}&#39;" in main_panel(page.text)


def test_the_script_endpoint_samples_the_version_and_refuses_a_reference(browser, api):
    client, token = browser
    headers = {"X-CSRF-Token": token, "Accept": "application/json"}
    body = {"text": TEXT, "target": "version:plain@1", "sampling": {"dropout": 0.25, "seed": 12}}
    result = client.post("/playground/encode", json=body, headers=headers)
    assert result.status_code == 200, result.text
    assert result.json()["ids"] == encode(api, "plain", sampling={"dropout": 0.25, "seed": 12}).json()["ids"]
    assert "Sampled with BPE-dropout" in result.json()["html"]
    refused = client.post("/playground/encode", json={**body, "target": "reference:gpt2"}, headers=headers)
    assert refused.status_code == 422 and refused.json()["field"] == "sampling"
    bad = client.post("/playground/encode", json={**body, "sampling": {"dropout": 3}}, headers=headers)
    assert bad.status_code == 422 and bad.json()["field"] == "sampling.dropout"
