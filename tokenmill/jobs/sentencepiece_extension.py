"""A sentencepiece model (BPE or Unigram) extended with pieces learned on new text.

The known approach (as Chinese-LLaMA and others extend Llama's model): train a model of the
same kind on the new text, with the base's normalization, then append to the base's
`ModelProto` the pieces it does not have, each base piece keeping its id, score and type.

- BPE: sentencepiece merges the adjacent pair whose piece scores highest. New pieces are
  appended in the order the new model learned them (so the pieces a longer one is made of come
  first), scored below every base piece: on any text the base's merges all happen before a new
  one, and a text none of whose symbol pairs makes a new piece encodes exactly as the base does.
- Unigram: new pieces keep their trained scores (log probabilities of another model): the
  Viterbi segmentation of any text may change where a new piece scores better, base-language
  text included. Base ids do not move; encodings of old text may. This is the approach's limit,
  stated in the guide.
- Characters of the new text the base lacks are added first (a piece sentencepiece cannot
  start from is unknown), then the other pieces, up to the vocabulary the spec asks for.
"""

from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tokenmill.errors import InvalidInput
from tokenmill.formats.sentencepiece_model import BPE, NORMAL, parse
from tokenmill.models import Team, TokenizerVersion
from tokenmill.queued_work.progress import Report
from tokenmill.store import ObjectStore
from tokenmill.training.export import manifest_of, sha256
from tokenmill.training.spec import BaseSpec, TrainingSpec
from tokenmill.training.version_files import TrainedFiles
from tokenmill.versions.import_formats import imported_files
from tokenmill.versions.registry import get_version, version_file

MODEL_FILE = "tokenizer.model"
OVERLAP = 2  # the new model is trained this many times larger than what is added: many of its pieces are the base's


def sentencepiece_spec(spec: TrainingSpec, row: TokenizerVersion, pinned: BaseSpec) -> TrainingSpec:
    """The spec of an extension of a sentencepiece version: its library and algorithm the base's."""
    algorithm = row.spec.get("algorithm")
    if algorithm not in ("bpe", "unigram"):
        raise InvalidInput(f"spec.base: {row.name} v{row.version} is a sentencepiece {algorithm} model: only bpe and "
                           "unigram models can be extended", field="spec.base")
    return spec.model_copy(update={"base": pinned, "library": "sentencepiece", "algorithm": algorithm,
                                   "byte_level": False, "pre_tokenizer": "metaspace"})


def load_model(factory: sessionmaker[Session], store: ObjectStore, team_id: Any, base: BaseSpec) -> bytes:
    """The base version's tokenizer.model."""
    with factory() as session:
        team = session.get_one(Team, team_id)
        row = get_version(session, team, base.tokenizer or "", base.version or "latest")
    return store.get_bytes(version_file(row, MODEL_FILE)["key"])


def extended_model(base_model: bytes, new_model: bytes, wanted: int) -> tuple[bytes, int]:
    """The base model with up to `wanted` pieces of the new one appended (see the module); and how many."""
    base, new = parse(base_model), parse(new_model)
    have = {piece.piece for piece in base.pieces}
    fresh = [piece for piece in new.pieces if piece.type == NORMAL and piece.piece not in have]
    characters = [piece for piece in fresh if len(piece.piece) == 1]
    chosen = (characters + [piece for piece in fresh if len(piece.piece) > 1])[:max(wanted, 0)]
    bpe = base.trainer_spec.model_type == BPE
    lowest = min((piece.score for piece in base.pieces if piece.type == NORMAL), default=0.0)
    for offset, piece in enumerate(chosen):
        added = base.pieces.add()  # type: ignore[attr-defined]  # protobuf's repeated field
        added.piece, added.type = piece.piece, NORMAL
        added.score = lowest - 1.0 - offset if bpe else piece.score
    base.trainer_spec.vocab_size = len(base.pieces)
    return base.SerializeToString(), len(chosen)  # type: ignore[attr-defined]


def sentencepiece_extension_files(spec: TrainingSpec, base_model: bytes, texts: Iterable[str], report: Report,
                                  lineage: dict[str, Any]) -> TrainedFiles:
    """Every file of the extended model, manifest included; the base goes into `lineage`."""
    from tokenmill.training.with_sentencepiece import train_sentencepiece

    assert spec.base is not None and spec.base.vocab_size is not None
    base = parse(base_model)
    wanted = spec.vocab_size - len(base.pieces)
    name = base.normalizer_spec.name
    learner = spec.model_copy(update={
        "base": None, "vocab_size": OVERLAP * wanted + 256, "special_tokens": ["<unk>"],
        "normalization": "nfkc" if "nfkc" in name else "none", "lowercase": "cf" in name})
    report("training", 0.0, force=True)
    trained = train_sentencepiece(learner, texts, lambda done: report("training", 0.8 * done))
    model, added = extended_model(base_model, trained.model, wanted)
    report("exporting", 0.82, force=True)
    imported = imported_files(model)
    lineage["base"] = {"label": spec.base.label, **spec.base.model_dump(), "merges_added": added,
                       "pieces_added": added, "first_new_id": len(base.pieces)}
    files = dict(imported.files)
    files["manifest.json"] = manifest_of(spec.model_dump(), lineage, files, imported.tiktoken)
    return TrainedFiles(files=files, hashes={name: sha256(data) for name, data in files.items()},
                        vocab_size=imported.vocab_size)
