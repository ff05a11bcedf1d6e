"""Extending a byte-level BPE with new merges, its ids untouched (a spec with `base`).

The base is a version of the team's that has a tiktoken rank file, or a reference (gpt2,
cl100k, o200k). The training texts are split by the base's regex; each distinct piece is
segmented by the base (tiktoken: its merges, lowest rank first) and counted; the merge learner
continues from those segmentations by rustbpe's rule (tokenmill.training.merge_learner,
`learn_merges_from`), numbering new tokens after every id the base uses, its special tokens
included. So every base token keeps its id and rank, and a text whose pieces hold no pair of
a new merge encodes to the base's ids exactly (new merges rank after every base merge, so they
apply only once the base's segmentation is done).

The files are those of an imported rank file (tokenmill.versions.import_formats) made from the
base's ranks and the new tokens. Learning stops early, and says so, if a new merge would make a
token the base already has (tiktoken ranks hold each byte string once).

Deliberately not handled: sentencepiece bases (appending pieces with scores), WordPiece and
Unigram bases, and filling a base's reserved special tokens.
"""

import json
import uuid
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import tiktoken
from sqlalchemy.orm import Session, sessionmaker

from tokenmill.errors import InvalidInput
from tokenmill.evaluation.references import PRESET_REFERENCES, load_reference
from tokenmill.formats.tiktoken_format import parse_rank_file, rank_file
from tokenmill.jobs.sentencepiece_extension import MODEL_FILE, sentencepiece_spec
from tokenmill.models import Corpus, Team, TokenizerVersion
from tokenmill.queued_work.progress import Report
from tokenmill.store import ObjectStore
from tokenmill.training.counting.distributed import PIECES, SPANS, Counting, count_in_parts, forget_counts
from tokenmill.training.counting.merge import Counts, Pruned, fitted, learner_budget
from tokenmill.training.export import TIKTOKEN_FILE, manifest_of, sha256
from tokenmill.training.merge_learner import added_up, learn_merges_from
from tokenmill.training.mixtures import Drawn
from tokenmill.training.patterns import SUPERWORD_SPLIT
from tokenmill.training.spec import BaseSpec, TrainingSpec
from tokenmill.training.version_files import TrainedFiles, train_version_files, training_texts, version_contents
from tokenmill.training.with_tokenmill import learned_from_counts
from tokenmill.versions.import_formats import imported_files
from tokenmill.versions.registry import get_version, version_file


@dataclass(frozen=True)
class Base:
    """What an extension starts from: the base's encoding (ranks, split regex, specials) and its name."""

    encoding: tiktoken.Encoding
    label: str

    @property
    def next_id(self) -> int:
        """The first id no base token uses."""
        return max(self.encoding.max_token_value, *self.encoding._special_tokens.values(), -1) + 1


def checked_base(session: Session, team: Team, spec: TrainingSpec) -> TrainingSpec:
    """The spec with its base pinned (the version number, the base's size), or a 422 naming
    `spec.base` for a base that cannot be extended so, or a vocab_size not above it."""
    base = spec.base
    assert base is not None
    if base.reference is not None:
        size = load_reference(PRESET_REFERENCES[base.reference]).n_vocab
        pinned = base.model_copy(update={"vocab_size": size})
    else:
        try:
            row = get_version(session, team, base.tokenizer or "", base.version or "latest")
        except Exception as exc:  # NotFound, or a malformed version
            raise InvalidInput(f"spec.base: {getattr(exc, 'detail', exc)}", field="spec.base") from None
        names = {entry["name"] for entry in row.files}
        pinned = base.model_copy(update={"version": row.version, "vocab_size": row.vocab_size})
        if TIKTOKEN_FILE not in names and MODEL_FILE in names:
            spec = sentencepiece_spec(spec, row, pinned)
        elif TIKTOKEN_FILE not in names:
            raise InvalidInput(f"spec.base: {row.name} v{row.version} cannot be extended: only byte-level BPE split by "
                               "one regex (a version with a tokenizer.tiktoken file) or a sentencepiece model (a "
                               "tokenizer.model) can be", field="spec.base")
    if spec.vocab_size <= (pinned.vocab_size or 0):
        raise InvalidInput(f"spec.base: vocab_size {spec.vocab_size} is not above the base's {pinned.vocab_size}",
                           field="spec.base")
    return spec.model_copy(update={"base": pinned})


def load_base(factory: sessionmaker[Session], store: ObjectStore, team_id: uuid.UUID, base: BaseSpec) -> Base:
    """The base's tiktoken encoding, from a reference's pinned ranks or a version's stored rank file."""
    if base.reference is not None:
        return Base(load_reference(PRESET_REFERENCES[base.reference]), base.label)
    with factory() as session:
        team = session.get(Team, team_id)
        if team is None:
            raise InvalidInput("spec.base: the team is gone", field="spec.base")
        row = get_version(session, team, base.tokenizer or "", base.version or "latest")
    return Base(_version_encoding(store, row), base.label)


def _version_encoding(store: ObjectStore, row: TokenizerVersion) -> tiktoken.Encoding:
    manifest = json.loads(store.get_bytes(version_file(row, "manifest.json")["key"]))["tiktoken"]
    ranks = parse_rank_file(store.get_bytes(version_file(row, TIKTOKEN_FILE)["key"]))
    return tiktoken.Encoding(f"{row.name}-v{row.version}", pat_str=manifest["pat_str"], mergeable_ranks=ranks,
                             special_tokens=manifest["special_tokens"])


def piece_counts(texts: Iterable[str], pattern: str, floor: int = 1, processes: int | None = None,
                 budget: int | None = None) -> tuple[Counts, Pruned]:
    """The pieces of the texts split by `pattern` (a base's regex, as tiktoken splits; or
    SUPERWORD_SPLIT's spans) counted by the counting children of `library: tokenmill` (every
    core, `training_processes`), each distinct piece once with the copies several children
    counted added up (as arrays: no dictionary of pieces); those seen at least `floor` times,
    or more if that is what fits `budget` bytes of the learner's memory (tokenmill.training.counting.merge)."""
    from tokenmill.settings import get_settings
    from tokenmill.training.with_tokenmill import counted_in_children

    lengths, seen, data = counted_in_children(pattern, None, texts, processes or get_settings().training_processes)
    return fitted(added_up(lengths, seen, data), floor, budget)


def pieces_of(counts: Counts) -> Iterator[tuple[bytes, int]]:
    """Each piece of the arrays, with its count."""
    lengths, seen, data = counts
    ends = np.cumsum(lengths)
    for length, end, count in zip(lengths.tolist(), ends.tolist(), seen.tolist(), strict=True):
        yield data[end - length:end].tobytes(), count


def extended_ranks(base: Base, counts: Counts, merges: int) -> tuple[dict[bytes, int], int]:
    """The base's ranks and the new tokens (at most `merges`), and how many were added. Each
    piece (a base regex's piece, or a superword span) is segmented by the base's ranks alone, as
    tiktoken encodes a piece its split regex gave: the learner starts from what the files will
    do, so every new token is what byte-pair encoding by rank makes of its own bytes."""
    encoding = base.encoding

    symbols, lengths = array("i"), array("q")  # each piece's ids end to end, and how many: no list a piece
    for piece, _ in pieces_of(counts):
        ids = encoding._encode_single_piece(piece)
        symbols.extend(ids)
        lengths.append(len(ids))
    learned = learn_merges_from(np.frombuffer(symbols, dtype=np.int32), np.frombuffer(lengths, dtype=np.int64),
                                counts[1], base.next_id, merges)
    del symbols, lengths
    ranks = dict(encoding._mergeable_ranks)
    tokens = {rank: token for token, rank in ranks.items()}
    added = 0
    for offset, (left, right) in enumerate(learned):
        token = tokens[left] + tokens[right]
        if token in ranks:  # another path to a token the base has: tiktoken cannot hold it twice
            break
        tokens[base.next_id + offset] = token
        ranks[token] = base.next_id + offset
        added += 1
    return ranks, added


def extension_files(spec: TrainingSpec, base: Base, texts: Iterable[str], report: Report,
                    lineage: dict[str, Any]) -> TrainedFiles:
    """Every file of the extended version, manifest included; the base goes into `lineage`."""
    assert spec.base is not None and spec.base.vocab_size is not None
    report("counting", 0.0, force=True)
    counts, _ = piece_counts(texts, base.encoding._pat_str)
    report("training", 0.5, force=True)
    ranks, added = extended_ranks(base, counts, spec.vocab_size - spec.base.vocab_size)
    report("exporting", 0.82, force=True)
    imported = imported_files(rank_file(ranks), base.encoding._pat_str, dict(base.encoding._special_tokens))
    lineage["base"] = {"label": base.label, **spec.base.model_dump(), "merges_added": added, "first_new_id": base.next_id}
    files = dict(imported.files)
    files["manifest.json"] = manifest_of(spec.model_dump(), lineage, files, imported.tiktoken)
    return TrainedFiles(files=files, hashes={name: sha256(data) for name, data in files.items()},
                        vocab_size=imported.vocab_size)


def superword_files(spec: TrainingSpec, store: ObjectStore, corpora: list[Corpus], report: Report,
                    lineage: dict[str, Any], regex_seconds: float, budget: int | None = None,
                    counting: Counting | None = None) -> TrainedFiles:
    """SuperBPE: the merges up to `transition_vocab_size` as a plain job learns them (stage 1),
    then merges across whitespace learned on the spans of SUPERWORD_SPLIT, each first segmented
    by stage 1's tokenizer; spans seen fewer than max(2, min_frequency) times are left out, and
    more if the rest would not fit `budget` bytes of the learner's memory (the threshold reached
    goes into the lineage's `pruned`, and the version's notes). Every stage-1 token keeps its id;
    the files split text by the spans' regex. With `counting: distributed` both stages' counts
    come from one pass of the parts on every worker that helps (`counting` coordinates them)."""
    assert spec.superword is not None
    first = spec.model_copy(update={"vocab_size": spec.superword.transition_vocab_size, "superword": None})
    floor = max(2, spec.min_frequency)
    if spec.counting == "distributed":
        if counting is None:
            raise ValueError("a spec with counting 'distributed' trains inside a job (it needs its parts' rows)")
        stage1, spans, pruned = _counted_in_parts(spec, first, store, corpora, counting, report, lineage,
                                                  regex_seconds, floor, budget)
    else:
        stage1 = train_version_files(first, store, corpora, lambda stage, done, force=False: report(
            stage, 0.5 * done, force=force), lineage, regex_seconds=regex_seconds).files
        report("counting spans", 0.5, force=True)
        texts = training_texts(store, corpora, drawn=Drawn.of(spec, corpora, lineage))
        spans, pruned = piece_counts(texts, SUPERWORD_SPLIT, floor=floor, budget=budget)
    tiktoken_info = json.loads(stage1["manifest.json"])["tiktoken"]
    encoding = tiktoken.Encoding("stage1", pat_str=tiktoken_info["pat_str"],
                                 mergeable_ranks=parse_rank_file(stage1[TIKTOKEN_FILE]),
                                 special_tokens=tiktoken_info["special_tokens"])
    lineage["pruned"] = pruned.record()
    report("training superwords", 0.65, force=True)
    ranks, added = extended_ranks(Base(encoding, "stage 1"), spans, spec.vocab_size - first.vocab_size)
    report("exporting", 0.82, force=True)
    imported = imported_files(rank_file(ranks), SUPERWORD_SPLIT, dict(encoding._special_tokens))
    lineage["superword"] = {**lineage.get("superword", {}), "transition_vocab_size": first.vocab_size,
                            "merges_added": added, "spans": pruned.kept, "split": SUPERWORD_SPLIT,
                            "stage1_split": encoding._pat_str}
    files = dict(imported.files)
    files["manifest.json"] = manifest_of(spec.model_dump(), lineage, files, imported.tiktoken)
    return TrainedFiles(files=files, hashes={name: sha256(data) for name, data in files.items()},
                        vocab_size=imported.vocab_size)


def _counted_in_parts(spec: TrainingSpec, first: TrainingSpec, store: ObjectStore, corpora: list[Corpus],
                      counting: Counting, report: Report, lineage: dict[str, Any], regex_seconds: float,
                      floor: int, budget: int | None) -> tuple[dict[str, bytes], Counts, Pruned]:
    # Every part counted once into both stages' spills; stage 1 learned from its merged pieces
    # (what that pruned goes into the lineage's superword record), then the spans merged.
    spilled = count_in_parts(spec, store, corpora, counting, report, regex_seconds, Drawn.of(spec, corpora, lineage))
    report("merging counts", 0.5, force=True)

    def merged() -> Counts:
        pieces, pruned = spilled.merged(PIECES, first.min_frequency, learner_budget(counting.limits.max_memory))
        lineage["superword"] = {"stage1_pruned": pruned.record()}
        return pieces

    tokenizer = learned_from_counts(first, merged)
    stage1 = version_contents(first, tokenizer, {}, lineage)
    report("merging spans", 0.6, force=True)
    spans, pruned = spilled.merged(SPANS, floor, budget)
    forget_counts(store, counting)
    return stage1, spans, pruned
