"""From a spec and stored corpora to the bytes of every file of a version.

Picks the library, streams the training documents from the store (reporting progress),
trains, and exports; the job pipeline does the rest (store, register, clean up). A custom regex
too slow on a document fails with a SlowRegex that names the document's corpus.
"""

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, islice
from typing import Any

from tokenizers import Tokenizer

from tokenmill.corpora.reading import corpus_documents
from tokenmill.models import Corpus
from tokenmill.queued_work.progress import Report, tracked
from tokenmill.store import ObjectStore
from tokenmill.training import with_tokenizers
from tokenmill.training.counting.distributed import Counting, train_counted
from tokenmill.training.export import artifact_files, manifest, sha256
from tokenmill.training.mixtures import Drawn
from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS, SlowRegex
from tokenmill.training.sampling import reservoir_sample
from tokenmill.training.spec import TrainingSpec
from tokenmill.training.with_rustbpe import train_rustbpe
from tokenmill.training.with_sentencepiece import train_sentencepiece
from tokenmill.training.with_tokenmill import train_tokenmill


@dataclass
class TrainedFiles:
    files: dict[str, bytes]
    hashes: dict[str, str]
    vocab_size: int


def training_texts(store: ObjectStore, corpora: list[Corpus], places: "Places | None" = None,
                   drawn: Drawn | None = None) -> Iterator[str]:
    """The documents of the training corpora, in order, streamed from the store: every one once,
    or as `drawn` says (the spec's mixture and deduplication, counted there); `places` notes
    where each corpus starts."""
    if drawn is not None:
        drawn.begin()
    for corpus in corpora:
        if places is not None:
            places.starts.append((places.read, corpus.name))
        documents = corpus_documents(store, corpus)
        for document in drawn.documents(corpus, documents) if drawn is not None else documents:
            if places is not None:
                places.read += 1
            yield document
    if drawn is not None:
        drawn.end()


class Places:
    """Which corpus each document of a stream of corpora came from, as far as it has been read."""

    def __init__(self) -> None:
        self.starts: list[tuple[int, str]] = []  # the number of each corpus's first document, and its name
        self.read = 0

    def of(self, number: int) -> str:
        """Where document `number` (from 0) of the stream is: its number in its corpus, and the corpus."""
        first, name = next((start for start in reversed(self.starts) if start[0] <= number), (0, "?"))
        return f"document {number - first + 1:,} of corpus {name!r}"

    def located(self, slow: SlowRegex) -> SlowRegex:
        """The failure, its documents named by corpus."""
        if slow.first is None:
            return slow
        where = self.of(slow.first)
        if slow.last is not None and slow.last != slow.first:
            where = f"one of the documents from {where} to {self.of(slow.last)}"
        return slow.at(where)


def train_tokenizer(spec: TrainingSpec, texts: Iterable[str], alphabet: list[str] | None = None,
                    progress: Callable[[float], None] | None = None,
                    regex_seconds: float = REGEX_DOCUMENT_SECONDS) -> tuple[Tokenizer, dict[str, bytes]]:
    """A tokenizer trained as the spec says, with the files only sentencepiece writes; a custom
    regex may take at most `regex_seconds` on one document (SlowRegex)."""
    if spec.library == "rustbpe":
        return train_rustbpe(spec, texts, regex_seconds), {}
    if spec.library == "tokenmill":
        return train_tokenmill(spec, texts, regex_seconds=regex_seconds), {}
    if spec.library == "sentencepiece":
        return train_sentencepiece(spec, texts, progress).tokenizer_and_files()
    return with_tokenizers.train(spec, texts, alphabet, regex_seconds), {}


def version_contents(spec: TrainingSpec, tokenizer: Tokenizer, extra: dict[str, bytes],
                     lineage: dict[str, Any]) -> dict[str, bytes]:
    """Every file of a version: the exports of the tokenizer, `extra`, and the manifest."""
    files, tiktoken_info = artifact_files(spec, tokenizer)
    files.update(extra)
    files["manifest.json"] = manifest(spec, lineage, files, tiktoken_info)
    return files


def train_version_files(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], report: Report,
                lineage: dict[str, Any], counting: Counting | None = None,
                regex_seconds: float = REGEX_DOCUMENT_SECONDS) -> TrainedFiles:
    """Train as the spec says and return every file of the version, manifest included.
    `counting` says where the parts of a `counting: distributed` spec are coordinated; a custom
    regex may take at most `regex_seconds` on one document (SlowRegex, naming it and its corpus)."""
    if spec.counting == "distributed":
        if counting is None:
            raise ValueError("a spec with counting 'distributed' trains inside a job (it needs its parts' rows)")
        report("counting", 0.0, force=True)
        tokenizer, extra = train_counted(spec, store, corpora, counting, report, lineage, regex_seconds,
                                         Drawn.of(spec, corpora, lineage))
        return _version(spec, tokenizer, extra, lineage, report)
    drawn = Drawn.of(spec, corpora, lineage)
    total = drawn.characters() if drawn is not None else sum(c.characters for c in corpora)
    report("training", 0.0, force=True)
    sample = None
    if spec.max_sentences:
        # A seeded uniform sample over all training corpora, drawn while streaming them.
        sample = reservoir_sample(tracked(training_texts(store, corpora, drawn=drawn), total, report, "sampling", 0.0, 0.2),
                                  spec.max_sentences, spec.seed)
        total = sum(map(len, sample))

    def texts() -> Iterable[str]:
        return sample if sample is not None else training_texts(store, corpora, drawn=drawn)

    if spec.parity:
        tokenizer, extra = _train_parity(spec, store, corpora, report, regex_seconds), {}
        return _version(spec, tokenizer, extra, lineage, report)
    alphabet = None
    if with_tokenizers.needs_alphabet(spec):
        # One more pass over the texts, to choose the alphabet the way character_coverage says.
        alphabet = with_tokenizers.coverage_alphabet(spec, tracked(texts(), total, report, "counting characters", 0.0, 0.2))
    start = 0.0 if sample is None and alphabet is None else 0.2
    places = Places()
    read = sample if sample is not None else training_texts(store, corpora, places, drawn)
    reading = tracked(read, total, report, "training", start, 0.5)
    try:
        tokenizer, extra = train_tokenizer(spec, reading, alphabet, lambda done: report("training", 0.5 + 0.3 * done),
                                           regex_seconds)
    except SlowRegex as slow:
        if sample is None:
            raise places.located(slow) from None
        raise slow.at(f"document {slow.first + 1:,} of the max_sentences sample" if slow.first is not None
                      else "a document of the max_sentences sample") from None
    return _version(spec, tokenizer, extra, lineage, report)


def _version(spec: TrainingSpec, tokenizer: Tokenizer, extra: dict[str, bytes], lineage: dict[str, Any],
             report: Report) -> TrainedFiles:
    report("exporting", 0.82, force=True)
    files = version_contents(spec, tokenizer, extra, lineage)
    return TrainedFiles(files=files, hashes={name: sha256(data) for name, data in files.items()},
                        vocab_size=tokenizer.get_vocab_size())


def by_language(corpora: list[Corpus]) -> dict[str, list[Corpus]]:
    """The corpora of each language, languages in the order they first appear."""
    groups: dict[str, list[Corpus]] = {}
    for corpus in corpora:
        groups.setdefault(corpus.language, []).append(corpus)
    return groups


def _train_parity(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], report: Report,
                  regex_seconds: float) -> Tokenizer:
    # Each language's first corpus is line-aligned with the others' (one parallel_group, checked
    # at submission): its first parity_dev_lines documents are the dev set, the rest trains.
    groups = list(by_language(corpora).values())
    dev = [list(islice(corpus_documents(store, group[0]), spec.parity_dev_lines)) for group in groups]
    total = sum(c.characters for c in corpora)
    done = 0.0
    languages = []
    for group, held_out in zip(groups, dev):
        share = sum(c.characters for c in group) / max(total, 1)
        texts = chain(islice(corpus_documents(store, group[0]), len(held_out), None),
                      *(corpus_documents(store, corpus) for corpus in group[1:]))
        languages.append(tracked(texts, sum(c.characters for c in group), report, "training", 0.5 * done,
                                 0.5 * (done + share)))
        done += share
    report("training", 0.0, force=True)
    return with_tokenizers.train_parity(spec, languages, dev, regex_seconds)
