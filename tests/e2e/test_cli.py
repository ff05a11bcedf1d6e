"""The user CLI (`tokenmill corpus upload`, `train --wait`, `download`) against the running stack."""

import json
import os
import subprocess
import sys

from tokenizers import Tokenizer

from tests.services import FIXTURES
from tests.stack import unique


def tokenmill(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tokenmill", *args], env=env, capture_output=True, text=True, timeout=300)


def test_upload_train_wait_download(stack, team_key, tmp_path):
    _, key = team_key
    env = {**os.environ, "TOKENMILL_API_URL": stack, "TOKENMILL_API_KEY": key}
    source = tmp_path / "es.txt"
    source.write_bytes(b"".join((FIXTURES / "book_quijote" / "spa_Latn.txt").open("rb").readlines()[:400]))

    uploaded = tokenmill("corpus", "upload", str(source), "--domain", "books", "--language", "spa_Latn", env=env)
    assert uploaded.returncode == 0, uploaded.stderr
    corpus = json.loads(uploaded.stdout)
    assert corpus["lines"] == 400 and corpus["domain"] == "books"

    name = unique("cli")
    trained = tokenmill("train", name, "--corpus", corpus["id"], "--vocab-size", "700", "--wait", env=env)
    assert trained.returncode == 0, trained.stderr
    assert trained.stdout.strip().endswith(f"{name} version 1 (700 tokens)")
    assert "warning" not in trained.stderr

    downloaded = tokenmill("download", f"{name}@latest", str(tmp_path / "out"), env=env)
    assert downloaded.returncode == 0, downloaded.stderr
    tokenizer = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == 700

    # 400 lines cannot fill 60,000 tokens: the version says how far it got, and the CLI warns.
    greedy = tokenmill("train", name, "--corpus", corpus["id"], "--vocab-size", "60000", "--wait", env=env)
    assert greedy.returncode == 0, greedy.stderr
    reached = int(greedy.stdout.strip().rsplit("(", 1)[1].split()[0])
    assert reached < 60000
    assert f"warning: the vocabulary reached {reached} of the 60000 tokens asked for" in greedy.stderr

    refused = tokenmill("train", name, "--corpus", corpus["id"], "--vocab-size", "10", env=env)
    assert refused.returncode != 0 and "spec.vocab_size" in refused.stderr
    anonymous = tokenmill("corpus", "upload", str(source), "--domain", "x", "--language", "y",
                          env={**env, "TOKENMILL_API_KEY": "tm_wrong"})
    assert anonymous.returncode != 0 and "401" in anonymous.stderr


def test_the_commands_for_the_rest_of_the_day(stack, team_key, tmp_path):
    import zstandard

    _, key = team_key
    env = {**os.environ, "TOKENMILL_API_URL": stack, "TOKENMILL_API_KEY": key}
    lines = b"".join((FIXTURES / "parallel_flores200_dev" / "eng_Latn.txt").open("rb").readlines()[:200])
    source = tmp_path / "english news.txt.zst"
    source.write_bytes(zstandard.ZstdCompressor().compress(lines))
    uploaded = tokenmill("corpus", "upload", str(source), "--domain", "news", "--language", "eng_Latn", env=env)
    assert uploaded.returncode == 0, uploaded.stderr
    corpus = json.loads(uploaded.stdout)
    assert corpus["name"] == "english news"  # the compression and format suffixes dropped

    listed = tokenmill("corpus", "list", env=env)
    assert listed.returncode == 0 and listed.stdout.splitlines()[0].split()[:3] == ["ID", "NAME", "DOMAIN"]
    assert corpus["id"] in listed.stdout
    assert json.loads(tokenmill("corpus", "list", "--json", env=env).stdout)["items"][0]["id"] == corpus["id"]
    shown = tokenmill("corpus", "show", corpus["id"], env=env)
    assert shown.returncode == 0 and "english news" in shown.stdout

    name = unique("day")
    assert tokenmill("train", name, "--corpus", corpus["id"], "--vocab-size", "600", "--wait", env=env).returncode == 0
    jobs = tokenmill("jobs", env=env)
    assert jobs.returncode == 0 and name in jobs.stdout and "succeeded" in jobs.stdout
    assert name in tokenmill("tokenizers", env=env).stdout
    versions = tokenmill("versions", name, "--json", env=env)
    assert json.loads(versions.stdout)["items"][0]["vocab_size"] == 600

    encoded = tokenmill("encode", f"{name}@1", "the quick brown fox", "--json", env=env)
    ids = json.loads(encoded.stdout)["ids"]
    shown = tokenmill("encode", name, "the quick brown fox", env=env)
    assert shown.returncode == 0 and "\u2423" in shown.stdout and str(ids) in shown.stdout
    reference = tokenmill("encode", "gpt2", "hello world", "--json", env=env)
    assert json.loads(reference.stdout)["ids"] == [31373, 995]

    report = tokenmill("report", name, env=env)
    assert report.returncode == 0, report.stderr
    assert "Characters per token" in report.stdout and "eng_Latn" in report.stdout

    missing = tokenmill("versions", "no-such-name", env=env)
    assert missing.returncode == 1 and "error 404" in missing.stderr
