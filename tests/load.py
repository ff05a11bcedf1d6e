"""A closed-loop HTTP load (benchmarks.metadata_load; the neighbours' metadata flood): `clients`
keep-alive connections, each sending its next GET as soon as the last one is answered, for
`seconds`; what wrk measures (requests/s, latency percentiles, answers by status). asyncio streams and a minimal HTTP/1.1 reader keep the load's own cost low:
at a few hundred requests a second it takes a few percent of a core, so both servers measured
in one run see the same load."""

import asyncio
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

CONNECT_TIMEOUT = 10.0


@dataclass
class Outcome:
    seconds: float
    latencies: list[float] = field(default_factory=list)  # of every answered request, in seconds
    statuses: dict[int, int] = field(default_factory=dict)
    errors: int = 0  # connections reset or timed out: counted as not 2xx

    @property
    def answered(self) -> int:
        return sum(self.statuses.values())

    @property
    def per_second(self) -> float:
        return self.statuses_2xx / self.seconds

    @property
    def statuses_2xx(self) -> int:
        return sum(count for status, count in self.statuses.items() if 200 <= status < 300)

    @property
    def not_2xx(self) -> int:
        return self.answered - self.statuses_2xx + self.errors

    def percentile(self, share: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else float("nan")

    def summary(self) -> dict:
        return {"requests_per_second": round(self.per_second, 1), "p50_ms": round(self.percentile(0.5) * 1000, 1),
                "p99_ms": round(self.percentile(0.99) * 1000, 1), "answered": self.answered,
                "not_2xx": self.not_2xx, "statuses": {str(k): v for k, v in sorted(self.statuses.items())}}


def run(url: str, headers: dict[str, str], clients: int, seconds: float) -> Outcome:
    """GET `url` from `clients` connections for `seconds`."""
    return asyncio.run(_run(url, headers, clients, seconds))


async def _run(url: str, headers: dict[str, str], clients: int, seconds: float) -> Outcome:
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"GET {target} HTTP/1.1", f"Host: {parts.netloc}", *(f"{k}: {v}" for k, v in headers.items())]
    request = ("\r\n".join(lines) + "\r\n\r\n").encode()
    outcome = Outcome(seconds)
    deadline = time.perf_counter() + seconds
    await asyncio.gather(*(_client(parts.hostname or "127.0.0.1", parts.port or 80, request, deadline, outcome)
                           for _ in range(clients)))
    return outcome


async def _client(host: str, port: int, request: bytes, deadline: float, outcome: Outcome) -> None:
    reader = writer = None
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        try:
            if writer is None:
                reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT)
            writer.write(request)
            status, keep = await asyncio.wait_for(_response(reader), max(deadline - started, 0) + 30)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
            outcome.errors += 1
            writer = _close(writer)
            continue
        outcome.latencies.append(time.perf_counter() - started)
        outcome.statuses[status] = outcome.statuses.get(status, 0) + 1
        if not keep:
            writer = _close(writer)
    _close(writer)


def _close(writer: asyncio.StreamWriter | None) -> None:
    if writer is not None:
        writer.close()
    return None


async def _response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one response (Content-Length or chunked body); its status and whether the connection stays open."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readuntil(b"\r\n")
    return status, headers.get("connection", "").lower() != "close"
