"""Response bodies of evaluations: per version, per run, and the fertility matrix (tokenmill.evaluation.reports,
tokenmill.evaluation.submission).

The core hands these over as dicts; the models say what they hold. A key the core leaves out
is `MISSING` here (absent from the JSON, never null), and times stay the strings the core
formats (`datetime.isoformat()`), so the bodies are what clients got before they were typed.
"""

import uuid
from typing import Annotated, Literal

from pydantic import MISSING, BaseModel, ConfigDict, Field, WithJsonSchema

from tokenmill.models import Status

# An ISO 8601 time as the core writes it; parsed and written again it would change ("+00:00" → "Z").
IsoTime = Annotated[str, WithJsonSchema({"type": "string", "format": "date-time"})]


class CurvePoint(BaseModel):
    vocab_size: int
    fertility: float
    chars_per_token: float


class CurveSample(BaseModel):
    corpora: int
    lines: int


class Metrics(BaseModel):
    """The §6 numbers of one tokenizer on one corpus, and what the worker stored beside them.

    Open-ended (`extra="allow"`): a key added by a newer worker comes through as it is.
    """

    model_config = ConfigDict(extra="allow")

    tokens: int
    words: int
    characters: int
    bytes: int
    fertility: float
    chars_per_token: float
    bytes_per_token: float
    continued_word_rate: float
    unk_rate: float
    byte_fallback_rate: float
    roundtrip_rate: float
    vocab_utilization: float
    shannon_efficiency: float
    renyi_efficiency: float
    word_rule: str | MISSING = MISSING
    encoded_by: str | MISSING = Field(MISSING, description="what encoded the corpus: tiktoken, tokenizers, sentencepiece or sentencepiece+word cache")
    token_counts: str | MISSING = Field(MISSING, description="each id's count clipped at 3, packed (for ghost tokens)")
    premium: float | MISSING = Field(MISSING, description="tokens / tokens of the pivot of its parallel group")
    vocab_curve: list[CurvePoint] | MISSING = MISSING
    vocab_curve_sample: CurveSample | MISSING = MISSING


class EvaluationOut(BaseModel):
    id: uuid.UUID
    corpus_id: uuid.UUID
    corpus: str = Field(description="the corpus's name")
    domain: str
    language: str
    parallel_group: str | None
    word_rule: str
    reference: str | None = Field(description="the reference tokenizer measured; null for a version")
    metrics: Metrics
    created_at: IsoTime


class CurveSeries(BaseModel):
    """A vocabulary-size curve to draw: measured once per version (`lines` of `corpora` corpora), or
    for an older version one per corpus (`lines` null)."""

    label: str
    corpora: int
    lines: int | None
    points: list[CurvePoint]


class VersionEvaluationsOut(BaseModel):
    name: str
    version: int
    items: list[EvaluationOut]
    vocab_curve: list[CurveSeries]


class EvaluationRunOut(BaseModel):
    id: uuid.UUID
    status: Status
    error: str | None
    reference: str | None
    version_id: uuid.UUID | None
    corpora: list[uuid.UUID] = Field(description="the corpora to evaluate on")
    whole: bool = Field(description="every document of each corpus is measured, not the seeded sample")
    results: list[EvaluationOut]
    created_at: IsoTime
    finished_at: IsoTime | None


class FertilityCell(BaseModel):
    """Corpora aggregated as a micro average: sums of tokens and words."""

    fertility: float
    chars_per_token: float
    tokens: int
    words: int
    corpora: int


class FertilityRowBase(BaseModel):
    name: str
    label: str
    domains: dict[str, FertilityCell] = Field(description="by domain")
    languages: dict[str, FertilityCell] = Field(description='by "domain/language"')
    premium: dict[str, dict[str, float]] = Field(description="by parallel group, then language")


class VersionRow(FertilityRowBase):
    kind: Literal["version"]
    version: int
    vocab_size: int
    parity: bool


class ReferenceRow(FertilityRowBase):
    kind: Literal["reference"]
    version: None
    vocab_size: None


class FertilityMatrixOut(BaseModel):
    domains: list[str]
    languages: list[str] = Field(description='"domain/language" columns')
    rows: list[Annotated[VersionRow | ReferenceRow, Field(discriminator="kind")]]
