"""/v1/tokenizers: names, versions, metadata, files and bundles, the encode playground and the cost report.

A file download reads its first chunk before answering, so a store that does not answer is a
503, not a 200 with nothing behind it; a read that fails later raises inside the stream, and
the server drops the connection short of the Content-Length it announced: the client sees an
error, never a complete-looking file.
"""

import io
import logging
import tarfile
from collections.abc import Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from service.deps import PageDep, SessionDep, StoreDep, TeamDep
from service.schemas import EncodeIn, Listing, TokenizerOut, VersionOut
from tokenmill.cost_report import combine, measured_costs, probed_costs
from tokenmill.playground import encode_with_version
from tokenmill.reports import version_curve, version_evaluations
from tokenmill.versions import get_version, list_names, list_versions, version_file

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/tokenizers", tags=["tokenizers"])

MEDIA_TYPES = {".json": "application/json", ".txt": "text/plain; charset=utf-8"}


@router.get("", response_model=Listing[TokenizerOut])
def read_names(session: SessionDep, team: TeamDep, page: PageDep):
    rows, total = list_names(session, team, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{name}/versions", response_model=Listing[VersionOut])
def read_versions(session: SessionDep, team: TeamDep, page: PageDep, name: str):
    rows, total = list_versions(session, team, name, page)
    return {"items": rows, "total": total, "page": page.page, "limit": page.limit}


@router.get("/{name}/versions/{version}", response_model=VersionOut)
def read_version(session: SessionDep, team: TeamDep, name: str, version: str):
    return get_version(session, team, name, version)


@router.get("/{name}/versions/{version}/bundle.tar.gz")
def download_bundle(session: SessionDep, store: StoreDep, team: TeamDep, name: str, version: str):
    row = get_version(session, team, name, version)
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


@router.get("/{name}/versions/{version}/files/{filename}")
def download_file(session: SessionDep, store: StoreDep, team: TeamDep, name: str, version: str, filename: str):
    row = get_version(session, team, name, version)
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


@router.get("/{name}/versions/{version}/evaluations")
def read_evaluations(session: SessionDep, team: TeamDep, name: str, version: str):
    row = get_version(session, team, name, version)
    return {"name": row.name, "version": row.version, "items": version_evaluations(session, team, row),
            "vocab_curve": version_curve(session, team, row)}


@router.post("/{name}/versions/{version}/encode")
def encode(request: Request, body: EncodeIn, session: SessionDep, store: StoreDep, team: TeamDep, name: str,
           version: str):
    row = get_version(session, team, name, version)
    session.commit()  # the encode may take its whole time limit: hold no database connection meanwhile
    return encode_with_version(store, row, body.text, body.sampling)


@router.get("/{name}/versions/{version}/report")
def read_report(session: SessionDep, store: StoreDep, team: TeamDep, name: str, version: str):
    """What the version costs next to GPT-2, cl100k_base and o200k_base (tokenmill.cost_report)."""
    row = get_version(session, team, name, version)
    measured = measured_costs(session, store, team, row)
    session.commit()  # the probes' sandbox encodes may take their time limit: hold no database connection meanwhile
    return combine(measured, probed_costs(store, row))
