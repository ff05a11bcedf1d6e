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
