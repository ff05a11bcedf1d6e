"""Upload throughput and the API's resident memory while it takes large corpora.

Starts `tokenmill serve` as its own process (SQLite + a local folder store), then for each
size in --mb uploads a generated corpus of that many MiB to POST /v1/corpora (FLORES lines in
five scripts, repeated), sampling the server's RSS every 50 ms. Prints one row per size: wall
time and MiB/s, the API process's CPU seconds, its RSS baseline, peak and growth.

    .venv/bin/python -m benchmarks.upload_throughput --mb 100 1024

The client streams the multipart body with a declared Content-Length, 1 MiB at a time, so
its own work (on the same two cores) stays small: what is measured is the API.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil

from tests.services import CORPORA, free_port, wait_for

MIB = 1024 * 1024
LANGUAGES = ("eng_Latn", "zho_Hans", "arb_Arab", "rus_Cyrl", "hin_Deva")


def corpus_file(path: Path, size: int) -> None:
    """A UTF-8 corpus of `size` bytes made by repeating real multilingual lines."""
    sample = b"".join((CORPORA / "parallel_flores200_dev" / f"{lang}.txt").read_bytes() for lang in LANGUAGES)
    with path.open("wb") as out:
        written = 0
        while written < size:
            piece = sample[: size - written]
            piece = piece[: piece.rfind(b"\n") + 1] or piece
            out.write(piece)
            written += len(piece)


def multipart_body(fields: dict[str, str], path: Path) -> tuple[int, str, Iterator[bytes]]:
    """Length, content type and streamed body of a form whose last part is the file."""
    boundary = uuid.uuid4().hex
    head = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
                    for name, value in fields.items())
    head += (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
             "Content-Type: text/plain\r\n\r\n").encode()
    tail = f"\r\n--{boundary}--\r\n".encode()

    def body() -> Iterator[bytes]:
        yield head
        with path.open("rb") as handle:
            while chunk := handle.read(MIB):
                yield chunk
        yield tail

    return len(head) + path.stat().st_size + len(tail), f"multipart/form-data; boundary={boundary}", body()


class Sampler:
    """The peak RSS of a process, sampled every 50 ms on a thread."""

    def __init__(self, process: psutil.Process) -> None:
        self.process, self.peak = process, process.memory_info().rss
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def upload(base: str, key: str, path: Path, process: psutil.Process) -> dict:
    """Upload one corpus; its counts, wall and CPU seconds and the server's RSS."""
    length, content_type, body = multipart_body({"name": path.stem, "domain": "bench", "language": "mul"}, path)
    baseline, cpu_before = process.memory_info().rss, process.cpu_times()
    client_before = psutil.Process().cpu_times()
    with Sampler(process) as sampler:
        started = time.monotonic()
        response = httpx.post(f"{base}/v1/corpora", content=body, timeout=3600,
                              headers={"Authorization": f"Bearer {key}", "Content-Type": content_type,
                                       "Content-Length": str(length)})
        seconds = time.monotonic() - started
    response.raise_for_status()
    cpu_after, client_after = process.cpu_times(), psutil.Process().cpu_times()
    return {**response.json(), "seconds": seconds, "baseline": baseline, "peak": sampler.peak,
            "server_cpu": (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system),
            "client_cpu": (client_after.user + client_after.system) - (client_before.user + client_before.system)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, nargs="+", default=[100, 1024], help="corpus sizes in MiB")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tm-bench-"))
    env = dict(os.environ,
               TOKENMILL_DATABASE_URL=f"sqlite:///{work / 'db.sqlite'}",
               TOKENMILL_STORAGE_URL=f"file://{work / 'store'}",
               TOKENMILL_BROKER_URL=f"filesystem://{work / 'broker'}")
    subprocess.run([sys.executable, "-m", "tokenmill", "migrate"], env=env, check=True, capture_output=True)
    key = subprocess.run([sys.executable, "-m", "tokenmill", "teams", "create", "bench"], env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tokenmill", "serve", "--port", str(port)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(f"{base}/healthz").status_code == 200, "API", 60)
        process = psutil.Process(server.pid)
        print(f"load average at start: {os.getloadavg()[0]:.1f}")
        print("| corpus | lines | wall | throughput | API CPU | client CPU | API RSS baseline | peak | growth |")
        print("|---|---|---|---|---|---|---|---|---|")
        for mb in args.mb:
            path = work / f"corpus-{mb:g}.txt"
            corpus_file(path, int(mb * MIB))
            row = upload(base, key, path, process)
            path.unlink()
            size = row["bytes"] / MIB
            print(f"| {size:.0f} MiB | {row['lines']:,} | {row['seconds']:.1f} s | "
                  f"**{size / row['seconds']:.1f} MiB/s** | {row['server_cpu']:.1f} s | {row['client_cpu']:.1f} s | "
                  f"{row['baseline'] / MIB:.1f} MiB | {row['peak'] / MIB:.1f} MiB | "
                  f"**{(row['peak'] - row['baseline']) / MIB:.1f} MiB** |", flush=True)
        print(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        server.terminate()
        server.wait(30)
        subprocess.run(["rm", "-rf", str(work)])


if __name__ == "__main__":
    main()
