"""A version's files as HTTP answers, for the API and the dashboard alike.

A file download reads its first chunk before answering, so a store that does not answer is a
503, not a 200 with nothing behind it; a read that fails later raises inside the stream, and
the server drops the connection short of the Content-Length it announced: the client sees an
error, never a complete-looking file.
"""

import io
import logging
import tarfile
from collections.abc import Iterator

from fastapi.responses import Response, StreamingResponse

from tokenmill.models import TokenizerVersion
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import version_file

log = logging.getLogger(__name__)

MEDIA_TYPES = {".json": "application/json", ".txt": "text/plain; charset=utf-8"}


def bundle_response(store: ObjectStore, row: TokenizerVersion) -> Response:
    """Every file of the version in one .tar.gz, under a folder named for it."""
    folder = f"{row.name}-v{row.version}"
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in row.files:
            data = store.get_bytes(entry["key"])
            info = tarfile.TarInfo(f"{folder}/{entry['name']}")
            info.size, info.mtime, info.mode = len(data), int(row.created_at.timestamp()), 0o644
            tar.addfile(info, io.BytesIO(data))
    headers = {"Content-Disposition": f'attachment; filename="{folder}.tar.gz"'}
    return Response(buffer.getvalue(), media_type="application/gzip", headers=headers)


def file_response(store: ObjectStore, row: TokenizerVersion, filename: str) -> StreamingResponse:
    """One file of the version, streamed from the store."""
    entry = version_file(row, filename)
    suffix = filename[filename.rfind("."):] if "." in filename else ""
    headers = {
        "Content-Disposition": f'attachment; filename="{filename}"',
        "Content-Length": str(entry["bytes"]),
        "ETag": f'"{entry["sha256"]}"',
    }
    chunks = store.iter_chunks(entry["key"])
    first = next(chunks, b"")  # a store that does not answer raises here: 503 (service/problems.py)
    return StreamingResponse(_stream(entry["key"], first, chunks),
                             media_type=MEDIA_TYPES.get(suffix, "application/octet-stream"), headers=headers)


def _stream(key: str, first: bytes, chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The file's chunks; a failed read raises, so the server aborts the connection mid-body."""
    yield first
    try:
        yield from chunks
    except Exception:
        log.warning("reading %s failed mid-download: the connection is dropped", key, exc_info=True)
        raise
