"""Importing a tokenizer as the next version of a name: parse in the sandbox, probe its regexes,
write every file, then register the row (and queue its evaluation, which the caller sends).

The files go under `versions/<team>/<version id>/` before the row exists; if registering fails
they are deleted, and if this process dies first, reconciliation removes them once older than
its grace period (tokenmill.jobs.reconcile). The version's lineage says `imported`, with the
source file's name, format and sha256.
"""

import platform
import uuid
from importlib.metadata import version as package_version
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.db import transaction
from tokenmill.errors import Failed, InvalidInput, OverMemory, TimedOut, TokenmillError
from tokenmill.models import TokenizerVersion
from tokenmill.sandboxed import sandbox
from tokenmill.store import ObjectStore
from tokenmill.training.export import manifest_of, sha256
from tokenmill.versions.import_formats import Imported
from tokenmill.versions.registry import next_version_number

IMPORT_SECONDS = 60.0  # parsing and deriving the files of one upload, in a sandbox process
LIBRARIES = ("tokenizers", "sentencepiece", "tiktoken")


def parsed_import(data: bytes, pat_str: str | None, special_tokens: dict[str, int] | None, owner: str) -> Imported:
    """The files derived from an upload, in a sandbox process on the owner's share; 422 naming `file`
    when it is not a tokenizer, or takes too long or too much memory to read."""
    pool = sandbox.current()
    try:
        imported: Imported = pool.call("tokenmill.versions.import_formats:imported_files", data, pat_str,
                                       special_tokens, timeout=IMPORT_SECONDS, owner=owner)
    except TimedOut:
        raise InvalidInput(f"file: reading it took longer than {IMPORT_SECONDS:g}s", field="file") from None
    except OverMemory:
        raise InvalidInput(f"file: reading it needed more than {pool.memory_bytes // 2**20} MiB", field="file") from None
    except Failed as exc:
        raise InvalidInput(f"file: it could not be read ({exc})"[:500], field="file") from None
    _probe_patterns(imported.patterns, owner)
    return imported


def _probe_patterns(patterns: list[str], owner: str) -> None:
    """Each regex the tokenizer splits with, probed as a custom pre_tokenizer_regex is (422 naming `file`)."""
    from tokenmill.training.spec import check_regex

    for pattern in patterns:
        try:
            check_regex(pattern, "tokenizers", owner)
        except InvalidInput as exc:
            raise InvalidInput(f"file: its pre-tokenizer regex {exc.detail.removeprefix('spec.')}", field="file") from None


def import_version(factory: sessionmaker[Session], store: ObjectStore, team_id: uuid.UUID, name: str,
                   imported: Imported, filename: str | None, source: bytes) -> TokenizerVersion:
    """Write the files, then register the version; nothing is left if registering fails."""
    version_id = uuid.uuid4()
    prefix = f"versions/{team_id}/{version_id}"
    lineage = _lineage(imported, filename, source)
    files = dict(imported.files)
    files["manifest.json"] = manifest_of(imported.spec, lineage, files, imported.tiktoken)
    written: list[str] = []
    try:
        for file_name, data in sorted(files.items()):
            store.put_bytes(f"{prefix}/{file_name}", data)
            written.append(f"{prefix}/{file_name}")
        return _register(factory, team_id, name, version_id, imported, lineage, files, prefix)
    except BaseException:
        for key in written:
            try:
                store.delete(key)
            except Exception:  # the store away: reconciliation removes them after its grace period
                break
        raise


def _lineage(imported: Imported, filename: str | None, source: bytes) -> dict[str, Any]:
    return {
        "imported": {"file": filename, "format": imported.source_format, "sha256": sha256(source),
                     "bytes": len(source)},
        "libraries": {name: package_version(name) for name in LIBRARIES},
        "python": platform.python_version(),
        "notes": imported.notes,
    }


def _register(factory: sessionmaker[Session], team_id: uuid.UUID, name: str, version_id: uuid.UUID,
              imported: Imported, lineage: dict[str, Any], files: dict[str, bytes], prefix: str) -> TokenizerVersion:
    listing = [{"name": file_name, "bytes": len(data), "sha256": sha256(data), "key": f"{prefix}/{file_name}"}
               for file_name, data in sorted(files.items())]
    for _ in range(5):
        try:
            with transaction(factory) as session:
                row = TokenizerVersion(id=version_id, team_id=team_id, name=name,
                                       version=next_version_number(session, team_id, name), job_id=None,
                                       spec=imported.spec, vocab_size=imported.vocab_size, files=listing,
                                       lineage=lineage, train_seconds=0.0, peak_memory_bytes=0)
                session.add(row)
            return row
        except IntegrityError:
            continue  # another version of the name took this number first
    raise TokenmillError("could not allocate a version number; try again")
