"""The user CLI fails with one clear line and a non-zero exit, never a traceback."""

import subprocess
import sys

import pytest

from tests.services import free_port


def tokenmill(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TOKENMILL_API_KEY": "tm_not-a-key", "HOME": str(cwd)}
    return subprocess.run([sys.executable, "-m", "tokenmill", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=60)


@pytest.mark.slow
def test_a_missing_file_is_one_line(tmp_path):
    done = tokenmill("corpus", "upload", "nope.txt", "--domain", "news", "--language", "eng_Latn", cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == ["tokenmill: nope.txt: No such file or directory"]


def test_an_unreachable_server_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    done = tokenmill("download", "my-bpe@1", "out", "--url", url, cwd=tmp_path)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tokenmill: cannot reach the API at {url}"), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_bad_spec_is_one_line(tmp_path):
    done = tokenmill("train", "t", "--corpus", "c", "--spec", "{nope", cwd=tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith("tokenmill: --spec is not valid JSON")
