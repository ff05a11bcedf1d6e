"""sentencepiece's model (`tokenizer.model`, a serialized `ModelProto`), typed as far as Tokenmill reads it.

sentencepiece's generated protobuf module makes its message classes at import time, out of
mypy's sight and with no stubs: the protocols here say what is read of a model, `parse`
gives one, and the enum values are plain ints.
"""

from collections.abc import Sequence
from typing import Protocol, cast

from sentencepiece import sentencepiece_model_pb2 as model_pb2

_Piece = model_pb2.ModelProto.SentencePiece  # type: ignore[attr-defined]  # made at import time
# Piece types, and the model types of a trainer spec.
NORMAL, UNKNOWN, CONTROL = int(_Piece.NORMAL), int(_Piece.UNKNOWN), int(_Piece.CONTROL)
USER_DEFINED, BYTE = int(_Piece.USER_DEFINED), int(_Piece.BYTE)
UNIGRAM, BPE = int(model_pb2.TrainerSpec.UNIGRAM), int(model_pb2.TrainerSpec.BPE)  # type: ignore[attr-defined]


class SentencePiece(Protocol):
    """A piece of a sentencepiece model."""

    piece: str
    score: float
    type: int


class TrainerSpec(Protocol):
    """How a sentencepiece model was trained."""

    model_type: int
    vocab_size: int
    unk_id: int
    unk_piece: str
    byte_fallback: bool


class NormalizerSpec(Protocol):
    """How a sentencepiece model normalizes its input."""

    name: str
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool
    precompiled_charsmap: bytes


class ModelProto(Protocol):
    """A sentencepiece model (sentencepiece_model_pb2.ModelProto)."""

    pieces: Sequence[SentencePiece]
    trainer_spec: TrainerSpec
    normalizer_spec: NormalizerSpec


def parse(model: bytes) -> ModelProto:
    """A serialized sentencepiece model (tokenizer.model), parsed."""
    return cast(ModelProto, model_pb2.ModelProto.FromString(model))  # type: ignore[attr-defined]  # as for _Piece
