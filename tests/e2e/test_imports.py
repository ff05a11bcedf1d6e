"""Importing a tokenizer as a version (issue 21.1), on the real stack: the API parses the upload in a
sandbox process, derives every file, registers the version, and the worker evaluates it."""

import base64
import io
import json
import tarfile

import pytest
import sentencepiece as spm
import tiktoken
from tokenizers import Tokenizer
from transformers import AutoTokenizer

from tests.e2e.test_evaluations import upload_head, wait_for_run
from tests.services import FIXTURES
from tests.stack import unique
from tests.waiting import until
from tokenmill.evaluation.references import _read_verified, _reference, load_reference
from tokenmill.training import with_tokenizers
from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_sentencepiece import train_sentencepiece

TEXT = "The boy plays in the garden, 12345 times. Der Junge spielt im Garten. 東京 👋🏽\n  def f(x): return x"
FLORES = FIXTURES / "parallel_flores200_dev" / "eng_Latn.txt"


def imported(http, name, file_name, data, **fields):
    return http.post(f"/v1/tokenizers/{name}/versions", data=fields, files={"file": (file_name, data)})


def bundle(http, name, version=1) -> dict[str, bytes]:
    raw = http.get(f"/v1/tokenizers/{name}/versions/{version}/bundle.tar.gz").content
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name.split("/")[-1]: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_a_tiktoken_rank_file_imports_loads_everywhere_and_is_evaluated(http, tmp_path):
    corpus = upload_head(http, FLORES, 100, name="en", domain="news", language="eng_Latn")
    ref = _reference("cl100k_base")
    name = unique("cl100k")
    answer = imported(http, name, "cl100k_base.tiktoken", _read_verified(ref), pat_str=ref.pat_str,
                      special_tokens=json.dumps(ref.special_tokens))
    assert answer.status_code == 201, answer.text
    version = answer.json()
    assert version["version"] == 1 and version["job_id"] is None
    assert version["lineage"]["imported"]["format"] == "tiktoken"
    assert version["lineage"]["imported"]["file"] == "cl100k_base.tiktoken"
    files = bundle(http, name)
    assert {"tokenizer.json", "tokenizer.tiktoken", "vocab.json", "merges.txt", "manifest.json",
            "tokenizer_config.json", "special_tokens_map.json"} <= set(files)
    expected = load_reference("cl100k_base").encode(TEXT)
    assert Tokenizer.from_str(files["tokenizer.json"].decode()).encode(TEXT, add_special_tokens=False).ids == expected
    manifest = json.loads(files["manifest.json"])
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in files["tokenizer.tiktoken"].splitlines())}
    again = tiktoken.Encoding("again", pat_str=manifest["tiktoken"]["pat_str"], mergeable_ranks=ranks,
                              special_tokens=manifest["tiktoken"]["special_tokens"])
    assert again.encode(TEXT) == expected
    folder = tmp_path / "hf"
    folder.mkdir()
    for file_name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (folder / file_name).write_bytes(files[file_name])
    assert AutoTokenizer.from_pretrained(folder).encode(TEXT, add_special_tokens=False) == expected
    # The worker evaluates it on the team's corpora, as it does a trained version.
    items = until(lambda: http.get(f"/v1/tokenizers/{name}/versions/1/evaluations").json()["items"], bool, 120)
    reference = wait_for_run(http, http.post("/v1/evaluations", json={"reference": "cl100k_base",
                                                                      "corpora": [corpus["id"]]}).json()["id"])
    assert items[0]["metrics"]["tokens"] == reference["results"][0]["metrics"]["tokens"]
    matrix = http.get("/v1/dashboard/fertility", params={"tokenizer": name}).json()
    assert any(row["label"] == f"{name} v1" for row in matrix["rows"])
    # The playground and the cost report, as for a trained version.
    encoded = http.post(f"/v1/tokenizers/{name}/versions/1/encode", json={"text": TEXT})
    assert encoded.status_code == 200 and encoded.json()["ids"] == expected
    report = http.get(f"/v1/tokenizers/{name}/versions/1/report")
    assert report.status_code == 200, report.text
    assert report.json()["language_tax"]["chars_per_token"]


def test_a_tokenizer_json_and_a_sentencepiece_model_import(http):
    texts = [line.strip() for line in FLORES.open(encoding="utf-8")][:300]
    wordpiece = with_tokenizers.train(resolve_spec({"algorithm": "wordpiece", "vocab_size": 600}), texts)
    name = unique("wp")
    answer = imported(http, name, "tokenizer.json", wordpiece.to_str().encode())
    assert answer.status_code == 201, answer.text
    assert answer.json()["spec"]["algorithm"] == "wordpiece"
    files = bundle(http, name)
    assert files["tokenizer.json"] == wordpiece.to_str().encode()  # kept byte for byte
    assert "tokenizer.tiktoken" not in files and "merges.txt" not in files
    assert json.loads(files["manifest.json"])["tiktoken"]["file"] is None  # the manifest says why there is none
    # The second import of the same name is its version 2.
    assert imported(http, name, "tokenizer.json", wordpiece.to_str().encode()).json()["version"] == 2

    spec = resolve_spec({"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 500})
    model = train_sentencepiece(spec, texts).tokenizer_and_files()[1]["tokenizer.model"]
    name = unique("spm")
    answer = imported(http, name, "tokenizer.model", model)
    assert answer.status_code == 201, answer.text
    assert answer.json()["spec"]["library"] == "sentencepiece"
    files = bundle(http, name)
    assert files["tokenizer.model"] == model
    processor = spm.SentencePieceProcessor(model_proto=files["tokenizer.model"])
    assert Tokenizer.from_str(files["tokenizer.json"].decode()).encode(texts[0], add_special_tokens=False).ids \
        == processor.encode(texts[0])


@pytest.mark.parametrize(("data", "fields", "field"), [
    (b"hello world, not a tokenizer\n", {}, "file"),
    (b'{"version": "1.0", "model": {"type": "Nonsense"}}', {}, "file"),
    (b"IQ== 0\nIg== 1\n", {}, "pat_str"),  # a rank file needs its pat_str
    (b"IQ== 0\nIg== 1\n", {"pat_str": r"\w+"}, "file"),  # ... and all 256 single bytes
    (b"\x00" * 100, {}, "file"),
])
def test_what_is_not_a_tokenizer_is_refused_naming_the_field(http, data, fields, field):
    name = unique("bad")
    answer = imported(http, name, "x.bin", data, **fields)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["field"] == field
    assert http.get(f"/v1/tokenizers/{name}/versions/1").status_code == 404


def test_an_imported_tokenizer_whose_regex_backtracks_is_refused(http):
    texts = [line.strip() for line in FLORES.open(encoding="utf-8")][:50]
    catastrophic = with_tokenizers.train(resolve_spec({"vocab_size": 300}), texts)
    data = json.loads(catastrophic.to_str())
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a+)+b"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    answer = imported(http, unique("slow"), "tokenizer.json", json.dumps(data).encode())
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "file" and "backtrack" in answer.json()["detail"]
