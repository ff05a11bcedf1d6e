"""Both store backends behave the same: streaming put/get, prefix delete, missing keys."""

import os

import pytest

from tokenmill.store import LocalStore, ObjectNotFound, open_store


@pytest.fixture(params=["s3", "local"])
def any_store(request, settings, tmp_path):
    if request.param == "local":
        return open_store(f"file://{tmp_path}/store")
    return open_store(settings.storage_url + f"/{request.node.name}", settings.s3_endpoint_url)


def test_streamed_put_and_chunked_get(any_store):
    chunks = [os.urandom(1024 * 1024) for _ in range(11)]  # > one 8 MiB multipart part
    any_store.put_stream("a/big", iter(chunks))
    got = list(any_store.iter_chunks("a/big", chunk_size=1024 * 1024))
    assert b"".join(got) == b"".join(chunks)
    assert max(len(c) for c in got) <= 1024 * 1024


def test_delete_prefix_and_missing_key(any_store):
    any_store.put_bytes("p/x/1", b"one")
    any_store.put_bytes("p/x/2", b"two")
    any_store.put_bytes("p/y", b"keep")
    any_store.delete_prefix("p/x")
    with pytest.raises(ObjectNotFound):
        any_store.get_bytes("p/x/1")
    assert any_store.get_bytes("p/y") == b"keep"


def test_failed_stream_leaves_no_object(any_store):
    def broken():
        yield b"partial data"
        raise ValueError("upload broke")

    with pytest.raises(ValueError):
        any_store.put_stream("half/written", broken())
    with pytest.raises(ObjectNotFound):
        any_store.get_bytes("half/written")


def test_local_store_refuses_keys_outside_its_folder(tmp_path):
    with pytest.raises(ValueError):
        LocalStore(tmp_path).put_bytes("../escape", b"x")
