"""Measure (not a test): another team's reads while one team floods the API with zstd-bomb uploads.

One team sends API uploads (POST /v1/corpora) and dashboard uploads (POST /corpora) at once,
each a few kilobytes of zstd that decompress to 64 MiB of lines; meanwhile a second team
lists its corpora (GET /v1/corpora) one request after another. Prints the second team's
latency (p50, p99, max) and every answer that was not a 2xx, and what the uploads got.

    PYTHONPATH=$PWD .venv/bin/python -m tests.api.measure_upload_isolation [--quotas raised|default]

`raised` lifts the uploading team's quotas (concurrent uploads, request rate, storage) so that
every upload runs: it measures the threads the uploads take. `default` keeps the settings'
quotas, which refuse most of them. A real API process (`tokenmill serve`) on a fresh
PostgreSQL database, its own Redis and a local folder store (so that S3's memory is not what
is measured).
"""

import argparse
import tempfile
import threading
import time
from pathlib import Path

import httpx
import zstandard

from tests import services
from tests.api.dashboard import sign_in
from tests.stack import api_process
from tokenmill.db import make_engine, make_sessionmaker, transaction
from tokenmill.quotas import set_quotas
from tokenmill.settings import Settings
from tokenmill.teams import create_team

BOMB_BYTES = 64 * 1024**2
READ_TIMEOUT = 60.0


def zstd_bomb() -> bytes:
    """Lines of text that zstd packs into a few kilobytes and that decompress to BOMB_BYTES."""
    line = b"the same short line of text, over and over again\n"
    return zstandard.ZstdCompressor(level=19).compress(line * (BOMB_BYTES // len(line)))


def multipart(fields: dict[str, str], data: bytes) -> tuple[bytes, str]:
    request = httpx.Request("POST", "http://x/", data=fields, files={"file": ("bomb.txt.zst", data)})
    return request.read(), request.headers["content-type"]


def api_upload(base: str, key: str, bomb: bytes, index: int) -> int | str:
    body, content_type = multipart({"name": f"api-{index}", "domain": "web", "language": "en"}, bomb)
    try:
        return httpx.post(f"{base}/v1/corpora", content=body, timeout=600,
                          headers={"Authorization": f"Bearer {key}", "Content-Type": content_type}).status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def dashboard_upload(base: str, cookies: httpx.Cookies, token: str, bomb: bytes, index: int) -> int | str:
    body, content_type = multipart({"csrf_token": token, "name": f"web-{index}", "domain": "web", "language": "en"},
                                   bomb)
    try:
        with httpx.Client(base_url=base, cookies=cookies, timeout=600) as client:
            return client.post("/corpora", content=body,
                               headers={"Content-Type": content_type, "Accept": "application/json"}).status_code
    except httpx.HTTPError as exc:
        return type(exc).__name__


def read_until(base: str, key: str, done: threading.Event) -> list[tuple[float, int | str]]:
    """(seconds, status or error) of GET /v1/corpora, one after another until `done`."""
    samples: list[tuple[float, int | str]] = []
    with httpx.Client(base_url=base, timeout=READ_TIMEOUT, headers={"Authorization": f"Bearer {key}"}) as client:
        while not done.is_set():
            started = time.monotonic()
            try:
                status: int | str = client.get("/v1/corpora").status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            samples.append((time.monotonic() - started, status))
            time.sleep(0.05)
    return samples


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run(base: str, uploader: str, reader: str, api_uploads: int, dashboard_uploads: int) -> None:
    bomb = zstd_bomb()
    print(f"bomb: {len(bomb)} bytes of zstd, {BOMB_BYTES} bytes decompressed")
    with httpx.Client(base_url=base, timeout=60) as browser:
        token = sign_in(browser, uploader)
        cookies = browser.cookies
    httpx.get(f"{base}/v1/corpora", headers={"Authorization": f"Bearer {reader}"}).raise_for_status()  # warm
    results: list[tuple[str, int | str]] = []
    threads = [threading.Thread(target=lambda i=i: results.append(("api", api_upload(base, uploader, bomb, i))))
               for i in range(api_uploads)]
    threads += [threading.Thread(target=lambda i=i: results.append(
        ("dashboard", dashboard_upload(base, cookies, token, bomb, i)))) for i in range(dashboard_uploads)]
    done = threading.Event()
    samples: list[tuple[float, int | str]] = []
    reading = threading.Thread(target=lambda: samples.extend(read_until(base, reader, done)))
    started = time.monotonic()
    reading.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    uploads_took = time.monotonic() - started
    done.set()
    reading.join()
    latencies = [seconds for seconds, _ in samples]
    failures = [(round(seconds, 2), status) for seconds, status in samples
                if not (isinstance(status, int) and 200 <= status < 300)]
    print(f"uploads: {api_uploads} API + {dashboard_uploads} dashboard, all answered in {uploads_took:.1f} s")
    for face in ("api", "dashboard"):
        counts: dict[int | str, int] = {}
        for kind, status in results:
            if kind == face:
                counts[status] = counts.get(status, 0) + 1
        print(f"  {face}: {counts}")
    print(f"other team's GET /v1/corpora: {len(samples)} requests, p50 {percentile(latencies, 0.5) * 1000:.0f} ms, "
          f"p99 {percentile(latencies, 0.99) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms, "
          f"non-2xx {len(failures)}: {failures[:10]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quotas", choices=("raised", "default"), default="raised")
    parser.add_argument("--api-uploads", type=int, default=8)
    parser.add_argument("--dashboard-uploads", type=int, default=40)
    args = parser.parse_args()
    with services.postgres_database() as database_url, services.redis_server() as broker_url, \
            tempfile.TemporaryDirectory(prefix="tokenmill-measure-") as folder:
        settings = Settings(database_url=database_url, broker_url=broker_url, storage_url=f"file://{folder}/store",
                            s3_endpoint_url="http://127.0.0.1:9", secret_key=services.SECRET_KEY)
        engine = make_engine(database_url)
        with transaction(make_sessionmaker(engine)) as session:
            uploading, uploader = create_team(session, "uploading")
            _, reader = create_team(session, "reading")
            if args.quotas == "raised":
                set_quotas(session, uploading.id, {"concurrent_uploads": 1000, "requests_per_minute": 100_000,
                                                    "storage_bytes": 2**50, "corpora": 100_000})
        engine.dispose()
        with api_process(settings, Path(folder) / "api.log") as base:
            run(base, uploader, reader, args.api_uploads, args.dashboard_uploads)


if __name__ == "__main__":
    main()
