"""Object store: one interface, two backends (S3-compatible through boto3, a local folder).

Everything streams in chunks: a corpus is never held whole in memory. Keys are POSIX-style
relative paths ("corpora/<team>/<id>"); the backends never interpret them beyond that.
"""

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO, Protocol
from urllib.parse import urlparse

from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

log = logging.getLogger(__name__)

CHUNK = 1024 * 1024
PART = ".part-"  # a local write in progress
# Faults of the store worth a retry: the endpoint is away or slow, not the request wrong.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    ConnectionError, TimeoutError, EndpointConnectionError, ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError,
)


class ObjectNotFound(KeyError):
    """The key is not in the store."""


@dataclass(frozen=True)
class StoredObject:
    key: str  # relative to the store's root or prefix, as given to put_*
    modified: datetime  # aware, UTC


class ObjectStore(Protocol):
    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None: ...
    def put_bytes(self, key: str, data: bytes) -> None: ...
    def iter_chunks(self, key: str, chunk_size: int = CHUNK, start: int = 0) -> Iterator[bytes]: ...
    def get_bytes(self, key: str) -> bytes: ...
    def delete_prefix(self, prefix: str) -> None: ...
    def delete(self, key: str) -> None: ...
    def list_objects(self, prefix: str) -> Iterator[StoredObject]: ...
    def abort_unfinished(self, older_than: datetime) -> int: ...
    def ping(self) -> None: ...


class LocalStore:
    """A folder on disk; writes land in a temporary file and are renamed into place."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key escapes the store: {key!r}")
        return path

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=PART)
        try:
            with os.fdopen(fd, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise

    def put_bytes(self, key: str, data: bytes) -> None:
        self.put_stream(key, [data])

    def iter_chunks(self, key: str, chunk_size: int = CHUNK, start: int = 0) -> Iterator[bytes]:
        try:
            handle = open(self._path(key), "rb")
        except FileNotFoundError:
            raise ObjectNotFound(key) from None
        with handle:
            handle.seek(start)
            while chunk := handle.read(chunk_size):
                yield chunk

    def get_bytes(self, key: str) -> bytes:
        return b"".join(self.iter_chunks(key))

    def delete_prefix(self, prefix: str) -> None:
        path = self._path(prefix)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        base = self._path(prefix)
        if not base.is_dir():
            return
        for path in sorted(base.rglob("*")):
            if path.is_file() and not path.name.startswith(PART):
                modified = datetime.fromtimestamp(path.stat().st_mtime, UTC)
                yield StoredObject(path.relative_to(self.root.resolve()).as_posix(), modified)

    def abort_unfinished(self, older_than: datetime) -> int:
        """Delete the temporary files of writes that never finished (their process died)."""
        aborted = 0
        for path in self.root.rglob(f"{PART}*"):
            if datetime.fromtimestamp(path.stat().st_mtime, UTC) < older_than:
                path.unlink(missing_ok=True)
                aborted += 1
        return aborted

    def ping(self) -> None:
        if not self.root.is_dir():
            raise OSError(f"store folder {self.root} is missing")


class ChunkReader:
    """A read()-able view of an iterator of chunks (for boto3's multipart upload, zstd).

    Chunks wait as views and are joined once per read, so each byte is copied once whatever
    the chunk and read sizes (growing and re-slicing one buffer is quadratic).
    """

    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = iter(chunks)
        # Chunks are pulled only until a read is served, so at most one piece outlives a read.
        self._pending: list[memoryview] = []
        self._size = 0  # bytes pending

    def read(self, size: int = -1) -> bytes:
        while size < 0 or self._size < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            if chunk:
                # bytes() copies only what is not immutable bytes already: a view must not change under us.
                self._pending.append(memoryview(bytes(chunk)))
                self._size += len(chunk)
        return self._take(self._size if size < 0 else min(size, self._size))

    def _take(self, wanted: int) -> bytes:
        parts, rest = [], []
        for piece in self._pending:
            if wanted >= len(piece):
                parts.append(piece)
                wanted -= len(piece)
            else:
                parts.append(piece[:wanted])  # slicing a view copies nothing
                rest.append(piece[wanted:])
                wanted = 0
        self._pending = rest
        self._size = sum(map(len, rest))
        return b"".join(parts)


class S3Store:
    """A bucket and prefix on any S3-compatible endpoint (AWS, MinIO, moto's server)."""

    def __init__(self, bucket: str, prefix: str = "", endpoint_url: str | None = None) -> None:
        import boto3
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/")
        # Bounded waits: an endpoint that drops packets fails a call in seconds, not minutes.
        config = Config(retries={"max_attempts": 3, "mode": "standard"}, s3={"addressing_style": "path"},
                        connect_timeout=5, read_timeout=30)
        self.client = boto3.client("s3", endpoint_url=endpoint_url, config=config)
        # Bounded memory: at most two 8 MiB parts in flight per upload.
        self.transfer = TransferConfig(multipart_chunksize=8 * CHUNK, max_concurrency=2)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put_stream(self, key: str, chunks: Iterable[bytes]) -> None:
        self.client.upload_fileobj(ChunkReader(chunks), self.bucket, self._key(key), Config=self.transfer)

    def put_bytes(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)

    def iter_chunks(self, key: str, chunk_size: int = CHUNK, start: int = 0) -> Iterator[bytes]:
        # From byte `start` on (a ranged GET), so that a reader of one part never fetches the rest.
        ranged = {"Range": f"bytes={start}-"} if start else {}
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key), **ranged)["Body"]
        except self.client.exceptions.NoSuchKey:
            raise ObjectNotFound(key) from None
        try:
            yield from body.iter_chunks(chunk_size)
        finally:
            body.close()

    def get_bytes(self, key: str) -> bytes:
        return b"".join(self.iter_chunks(key))

    def delete_prefix(self, prefix: str) -> None:
        paginator = self.client.get_paginator("list_objects_v2")
        for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            keys = [{"Key": item["Key"]} for item in page.get("Contents", [])]
            if keys:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def list_objects(self, prefix: str) -> Iterator[StoredObject]:
        strip = len(self._key(""))
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
            for item in page.get("Contents", []):
                yield StoredObject(item["Key"][strip:], item["LastModified"])

    def abort_unfinished(self, older_than: datetime) -> int:
        """Abort multipart uploads begun before `older_than` (their uploader died mid-stream)."""
        aborted = 0
        for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket,
                                                                                  Prefix=self._key("")):
            for upload in page.get("Uploads", []):
                if upload["Initiated"] < older_than:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=upload["Key"], UploadId=upload["UploadId"])
                    aborted += 1
        return aborted

    def ping(self) -> None:
        self.client.head_bucket(Bucket=self.bucket)


def open_store(url: str, endpoint_url: str | None = None) -> ObjectStore:
    """The store a TOKENMILL_STORAGE_URL names: s3://bucket/prefix or file:///path."""
    parsed = urlparse(url)
    if parsed.scheme == "s3":
        return S3Store(parsed.netloc, parsed.path, endpoint_url)
    if parsed.scheme == "file":
        return LocalStore(Path(parsed.netloc + parsed.path))
    raise ValueError(f"unsupported storage URL {url!r}: use s3://bucket/prefix or file:///path")


def read_into(handle: BinaryIO, chunk_size: int = CHUNK) -> Iterator[bytes]:
    """Chunks of an open binary file, for put_stream."""
    while chunk := handle.read(chunk_size):
        yield chunk


def delete_now_or_later(delete: Callable[[str], object], key: str) -> None:
    """Delete a key or a prefix (`delete` is the store's `delete` or `delete_prefix`) now if the
    store answers; the sweeper's reconciliation deletes it later otherwise."""
    try:
        delete(key)
    except Exception:
        log.warning("could not delete %s now; reconciliation will", key, exc_info=True)
