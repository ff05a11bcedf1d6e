"""For tests against a real `tokenmill serve` process (`tests.stack.api_process` starts one):
register a version from bytes a test makes (rows and files as the pipeline writes them)."""

import hashlib
import uuid

from tokenmill.db import transaction
from tokenmill.jobs.pipeline import lineage
from tokenmill.models import Team, TokenizerVersion
from tokenmill.training.spec import TrainingSpec


def add_version(sessionmaker, store, team: Team, name: str, spec: TrainingSpec, files: dict[str, bytes],
                vocab_size: int) -> TokenizerVersion:
    """Version 1 of `name`, with these files stored under a key of its own."""
    prefix = f"versions/{team.id}/{uuid.uuid4()}"
    for filename, data in files.items():
        store.put_bytes(f"{prefix}/{filename}", data)
    entries = [{"name": filename, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                "key": f"{prefix}/{filename}"} for filename, data in sorted(files.items())]
    with transaction(sessionmaker) as session:
        row = TokenizerVersion(team_id=team.id, name=name, version=1, spec=spec.model_dump(), vocab_size=vocab_size,
                               files=entries, lineage=lineage(spec, [], uuid.uuid4()), train_seconds=0.0,
                               peak_memory_bytes=0)
        session.add(row)
    return row
