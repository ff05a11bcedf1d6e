"""Upload a real multilingual corpus, train byte-level BPE through the worker, download, load."""

import io
import tarfile

from tokenizers import Tokenizer
from transformers import AutoTokenizer

from tests.combinations import TORTURE
from tests.services import FIXTURES
from tests.stack import unique
from tests.waiting import finished

LANGUAGES = ["eng_Latn", "zho_Hans", "arb_Arab", "hin_Deva", "rus_Cyrl", "jpn_Jpan", "spa_Latn"]


def multilingual_corpus(lines_per_language: int = 400) -> bytes:
    parts = []
    for language in LANGUAGES:
        with (FIXTURES / "parallel_flores200_dev" / f"{language}.txt").open("rb") as handle:
            parts += [next(handle) for _ in range(lines_per_language)]
    return b"".join(parts)


def wait_for_job(http, job_id: str, timeout: float = 300) -> dict:
    return finished(http, f"/v1/jobs/{job_id}", timeout)


def submit(http, name: str, corpus_id: str, key: str | None = None, vocab_size: int = 8000):
    headers = {"Idempotency-Key": key} if key else {}
    body = {"tokenizer": name, "spec": {"algorithm": "bpe", "vocab_size": vocab_size, "pre_tokenizer": "gpt2",
                                        "special_tokens": ["<|endoftext|>"]},
            "train_corpora": [corpus_id]}
    return http.post("/v1/jobs", json=body, headers=headers)


def test_upload_train_download_load(http, tmp_path):
    data = multilingual_corpus()
    corpus = http.post("/v1/corpora", data={"name": "flores-7", "domain": "news", "language": "mul"},
                       files={"file": ("flores.txt", data)}).json()
    name = unique("bytebpe")
    response = submit(http, name, corpus["id"])
    assert response.status_code == 202, response.text
    job = wait_for_job(http, response.json()["id"])
    assert job["status"] == "succeeded", job["error"]
    assert (job["version"], job["progress"], job["tokenizer"]) == (1, 1.0, name)

    version = http.get(f"/v1/tokenizers/{name}/versions/latest").json()
    assert version["version"] == 1 and version["vocab_size"] == 8000
    names = {f["name"] for f in version["files"]}
    assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "manifest.json"} <= names
    assert version["lineage"]["corpora"][0]["sha256"] == corpus["sha256"]
    assert set(version["lineage"]["libraries"]) >= {"tokenizers", "sentencepiece", "tiktoken", "transformers"}

    raw = http.get(f"/v1/tokenizers/{name}/versions/1/files/tokenizer.json")
    assert raw.status_code == 200
    (tmp_path / "tokenizer.json").write_bytes(raw.content)
    tokenizer = Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 8000
    assert tokenizer.token_to_id("<|endoftext|>") == 0

    bundle = http.get(f"/v1/tokenizers/{name}/versions/1/bundle.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(bundle.content)) as tar:
        tar.extractall(tmp_path / "bundle", filter="data")
    folder = tmp_path / "bundle" / f"{name}-v1"
    assert {p.name for p in folder.iterdir()} == names
    auto = AutoTokenizer.from_pretrained(str(folder))
    for text in TORTURE + [line.decode() for line in data.splitlines()[::300]]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        assert tokenizer.decode(ids) == text
        assert auto.encode(text, add_special_tokens=False) == ids
        assert auto.decode(ids) == text


def test_two_jobs_make_two_versions_and_idempotency_key_makes_one_job(http):
    corpus = http.post("/v1/corpora", data={"name": "small", "domain": "news", "language": "eng_Latn"},
                       files={"file": ("s.txt", multilingual_corpus(60))}).json()
    name = unique("twice")
    first, second = submit(http, name, corpus["id"], vocab_size=600), submit(http, name, corpus["id"], vocab_size=600)
    assert first.json()["id"] != second.json()["id"]
    jobs = [wait_for_job(http, r.json()["id"]) for r in (first, second)]
    assert sorted(j["version"] for j in jobs) == [1, 2]
    versions = http.get(f"/v1/tokenizers/{name}/versions").json()
    assert [v["version"] for v in versions["items"]] == [2, 1]

    key = unique("key")
    idem = unique("idem")
    a, b = submit(http, idem, corpus["id"], key=key), submit(http, idem, corpus["id"], key=key)
    assert a.status_code == 202 and b.status_code == 200
    assert a.json()["id"] == b.json()["id"]
    other = submit(http, unique("idem"), corpus["id"], key=key)  # the same key for another request
    assert other.status_code == 422 and other.json()["field"] == "Idempotency-Key"
    assert wait_for_job(http, a.json()["id"])["status"] == "succeeded"
