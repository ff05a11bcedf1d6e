"""Resident memory of the API process while it takes a large corpus upload.

Starts `tokenmill serve` as its own process (SQLite + a local folder store by default, or
the S3 endpoint given by --s3-endpoint), streams a generated corpus of --gib GiB to
POST /v1/corpora, samples the server's RSS every 50 ms, and prints baseline, peak and growth.

    .venv/bin/python -m benchmarks.upload_memory --gib 1
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import psutil

from tests.services import CORPORA, free_port, wait_for

MIB = 1024 * 1024


def corpus_file(path: Path, size: int) -> None:
    """A UTF-8 corpus of `size` bytes made by repeating real multilingual lines."""
    sample = b"".join((CORPORA / "parallel_flores200_dev" / f"{lang}.txt").read_bytes()
                      for lang in ("eng_Latn", "zho_Hans", "arb_Arab", "rus_Cyrl", "hin_Deva"))
    with path.open("wb") as out:
        written = 0
        while written < size:
            piece = sample[: size - written]
            piece = piece[: piece.rfind(b"\n") + 1] or piece
            out.write(piece)
            written += len(piece)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tm-bench-"))
    env = dict(os.environ,
               TOKENMILL_DATABASE_URL=f"sqlite:///{work / 'db.sqlite'}",
               TOKENMILL_STORAGE_URL=f"file://{work / 'store'}",
               TOKENMILL_BROKER_URL=f"filesystem://{work / 'broker'}")
    subprocess.run([sys.executable, "-m", "tokenmill", "migrate"], env=env, check=True)
    key = subprocess.run([sys.executable, "-m", "tokenmill", "teams", "create", "bench"], env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    size = int(args.gib * 1024 * MIB)
    data = work / "corpus.txt"
    corpus_file(data, size)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tokenmill", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "API", 60)
        process = psutil.Process(server.pid)
        baseline = process.memory_info().rss
        peak = [baseline]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        started = time.monotonic()
        with data.open("rb") as handle:
            response = httpx.post(f"{base}/v1/corpora", headers={"Authorization": f"Bearer {key}"},
                                  data={"name": "big", "domain": "bench", "language": "mul"},
                                  files={"file": ("corpus.txt", handle)}, timeout=3600)
        seconds = time.monotonic() - started
        done.set()
        sampler.join()
        response.raise_for_status()
        corpus = response.json()
        print(f"uploaded {corpus['bytes'] / MIB:.0f} MiB, {corpus['lines']} lines in {seconds:.1f} s "
              f"({corpus['bytes'] / MIB / seconds:.1f} MiB/s)")
        print(f"API RSS baseline {baseline / MIB:.1f} MiB, peak {peak[0] / MIB:.1f} MiB, "
              f"growth {(peak[0] - baseline) / MIB:.1f} MiB")
    finally:
        server.terminate()
        server.wait(30)
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()
