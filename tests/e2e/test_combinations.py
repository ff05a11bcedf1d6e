"""Every supported combination, trained through the worker, loaded in every library that reads it."""

import io
import tarfile

import httpx
import pytest

from tests.combinations import COMBINATIONS, LANGUAGES, TORTURE
from tests.conftest import make_team
from tests.e2e.test_walking_skeleton import wait_for_job
from tests.loaders import decoders, encoders
from tests.services import FIXTURES
from tests.stack import unique


@pytest.fixture(scope="module")
def corpus(stack, sessionmaker):
    """A multilingual corpus (FLORES, 300 lines in each of seven scripts), owned by one team."""
    _, key = make_team(sessionmaker)
    data = b"".join(b"".join((FIXTURES / "parallel_flores200_dev" / f"{lang}.txt").open("rb").readlines()[:300])
                    for lang in LANGUAGES)
    client = httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {key}"}, timeout=120)
    corpus = client.post("/v1/corpora", data={"name": "flores7", "domain": "news", "language": "mul"},
                         files={"file": ("flores7.txt", data)}).json()
    yield client, corpus, [line.decode() for line in data.splitlines()[::150]]
    client.close()


@pytest.mark.parametrize("combination", COMBINATIONS, ids=lambda c: c.name)
def test_combination_trains_loads_everywhere_and_agrees(corpus, combination, tmp_path):
    http, row, sample = corpus
    name = unique(combination.name.split("/")[0])
    job = http.post("/v1/jobs", json={"tokenizer": name, "spec": combination.spec, "train_corpora": [row["id"]],
                                      "eval_corpora": [row["id"]]}).json()
    done = wait_for_job(http, job["id"])
    assert done["status"] == "succeeded", done["error"]
    bundle = http.get(f"/v1/tokenizers/{name}/versions/1/bundle.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(bundle.content)) as tar:
        tar.extractall(tmp_path, filter="data")
    folder = tmp_path / f"{name}-v1"
    assert {p.name for p in folder.iterdir()} == combination.files

    formats = encoders(folder)
    for text in TORTURE + sample:
        ids = {fmt: encode(text) for fmt, encode in formats.items()}
        assert len({tuple(v) for v in ids.values()}) == 1, (text, ids)
    if combination.lossless:
        reference = formats["tokenizer.json"]
        for fmt, decode in decoders(folder).items():
            for text in TORTURE + sample:
                assert decode(reference(text)) == text, (fmt, text)
