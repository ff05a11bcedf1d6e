"""Authentication before the body, and capped bodies, against a real API process over raw sockets.

A client announces a body of 400 MB and sends a few bytes: the API must answer at once
(401 without a key, 413 with one) instead of waiting for, and buffering, the rest.
"""

import json
import socket
from urllib.parse import urlparse

import httpx

from tests.conftest import make_team

ANNOUNCED = 400 * 1024**2
PROBLEM = "application/problem+json"


def raw_request(base: str, head: str, body_parts=(), timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    """Send a request head and some body bytes, then read whatever the server answers (status, headers, body)."""
    address = urlparse(base)
    with socket.create_connection((address.hostname, address.port), timeout=timeout) as sock:
        sock.sendall(head.encode())
        try:
            for part in body_parts:
                sock.sendall(part)
        except OSError:
            pass  # the server answered and closed while we were still sending: read its answer
        data = b""
        try:
            while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            raise AssertionError(f"no answer within {timeout} s (the server is waiting for the body)") from None
    head_bytes, _, body = data.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":")[1])
    return 0


def post_head(path: str, content_type: str, length: int | None, key: str | None = None) -> str:
    lines = [f"POST {path} HTTP/1.1", "Host: tokenmill", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked")
    if key:
        lines.append(f"Authorization: Bearer {key}")
    return "\r\n".join(lines) + "\r\n\r\n"


def test_an_unauthenticated_body_is_refused_before_it_is_read(served_api):
    status, headers, body = raw_request(served_api, post_head("/v1/jobs", "application/json", ANNOUNCED), [b'{"a": "'])
    assert status == 401 and headers["content-type"] == PROBLEM
    assert json.loads(body)["title"] == "Unauthorized"
    status, _, _ = raw_request(served_api, post_head("/v1/corpora", "multipart/form-data; boundary=x", ANNOUNCED,
                                                     key="tm_wrong"), [b"--x\r\n"])
    assert status == 401


def test_an_announced_body_over_the_cap_is_refused_before_it_is_read(served_api, sessionmaker):
    _, key = make_team(sessionmaker)
    status, headers, body = raw_request(served_api, post_head("/v1/jobs", "application/json", ANNOUNCED, key),
                                        [b'{"a": "'])
    assert status == 413 and headers["content-type"] == PROBLEM
    assert str(1024**2) in json.loads(body)["detail"]  # settings.max_json_body_bytes


def test_a_chunked_body_is_counted_and_refused_past_the_cap(served_api, sessionmaker):
    _, key = make_team(sessionmaker)
    pieces = [b'{"tokenizer": "'] + [b"x" * 65536] * 24  # 1.5 MiB, over the 1 MiB cap
    chunks = [b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces]
    status, headers, body = raw_request(served_api, post_head("/v1/jobs", "application/json", None, key),
                                        chunks, timeout=15)
    assert status == 413 and headers["content-type"] == PROBLEM, body[:300]


def test_a_dashboard_form_over_the_cap_is_refused(served_api):
    response = httpx.post(f"{served_api}/signin", data={"api_key": "k" * (1024**2 + 1)}, timeout=30)
    assert response.status_code == 413 and response.headers["content-type"] == PROBLEM


def test_a_body_within_the_cap_still_works(served_api, sessionmaker):
    _, key = make_team(sessionmaker)
    response = httpx.post(f"{served_api}/v1/jobs", json={"tokenizer": "t", "train_corpora": [], "pad": "x" * 500_000},
                          headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert response.status_code == 422 and response.json()["field"] == "pad"  # read, parsed and validated
