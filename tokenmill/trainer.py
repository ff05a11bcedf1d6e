"""From a spec and stored corpora to the bytes of every file of a version.

Picks the library, streams the training documents from the store (reporting progress),
trains, and exports; the job pipeline does the rest (store, register, clean up).
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tokenmill.corpora import iter_documents
from tokenmill.export import artifact_files, manifest, sha256
from tokenmill.models import Corpus
from tokenmill.progress import tracked
from tokenmill.spec import TrainingSpec
from tokenmill.store import ObjectStore
from tokenmill import training

Report = Callable[..., None]


@dataclass
class TrainedFiles:
    files: dict[str, bytes]
    hashes: dict[str, str]
    vocab_size: int


def training_texts(store: ObjectStore, corpora: list[Corpus]) -> Iterator[str]:
    """Every document of the training corpora, in order, streamed from the store."""
    for corpus in corpora:
        yield from iter_documents(store, corpus.storage_key, corpus.format, corpus.text_field)


def train_files(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], report: Report,
                lineage: dict[str, Any]) -> TrainedFiles:
    """Train as the spec says and return every file of the version, manifest included."""
    total = sum(c.characters for c in corpora)
    report("training", 0.0, force=True)
    texts = tracked(training_texts(store, corpora), total, report, "training", 0.0, 0.8)
    tokenizer = training.train(spec, texts)
    report("exporting", 0.85, force=True)
    files, tiktoken_info = artifact_files(spec, tokenizer)
    vocab_size = tokenizer.get_vocab_size()
    files["manifest.json"] = manifest(spec, lineage, files, tiktoken_info)
    return TrainedFiles(files=files, hashes={name: sha256(data) for name, data in files.items()}, vocab_size=vocab_size)
