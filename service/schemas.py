"""Response and request bodies of the REST API."""

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import MISSING, BaseModel, ConfigDict, Field, WithJsonSchema, computed_field
from sqlalchemy.orm import Session

from service.parameters import NAME_SCHEMA, VERSION_SCHEMA, JsonTyped
from tokenmill.evaluation.references import BASELINES
from tokenmill.jobs.submission import version_outcomes
from tokenmill.models import TrainingJob
from tokenmill.playground.encode import MAX_TEXT
from tokenmill.sandboxed.subword_sampling import MAX_NBEST, SamplingOptions
from tokenmill.training.spec import TrainingSpec
from tokenmill.versions.registry import vocabulary_notes

T = TypeVar("T")


class Listing(BaseModel, Generic[T]):
    items: list[T]
    total: int
    page: int
    limit: int


class CorpusOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    domain: str
    language: str
    format: str
    text_field: str | None
    parallel_group: str | None
    bytes: int
    lines: int
    words: int
    characters: int
    sha256: str
    statistics: dict[str, Any] | None
    statistics_error: str | None = Field(None, description="why the statistics could not be computed, if they failed")
    created_at: datetime


class DuplicatesOut(BaseModel):
    """Exact-duplicate documents across the team's corpora (tokenmill.corpora.duplicates): merged from the
    hashes each corpus's statistics stored; the counts are null when not computed, `reason` says why."""

    model_config = ConfigDict(from_attributes=True)

    corpora: int = Field(description="corpora counted: those whose statistics counted their duplicates")
    corpora_left_out: int = Field(description="corpora whose statistics are not ready, failed, or predate duplicate "
                                              "counting (or whose hashes could not be read)")
    documents: int = Field(description="documents of the corpora counted")
    duplicate_documents: int | None = Field(description="documents whose exact text is an earlier document of the "
                                                        "corpora counted, in the same corpus or another")
    duplicate_share: float | None = Field(description="duplicate_documents / documents")
    cross_corpus_duplicates: int | None = Field(description="of duplicate_documents, those that are no duplicate "
                                                            "within their own corpus: they repeat another corpus")
    reason: str | None = Field(description="why the counts were not computed (too many documents to merge)")


def _inlined(schema: Any, definitions: dict[str, Any]) -> Any:
    """A JSON schema with its `$ref`s to `definitions` replaced by what they name."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return _inlined(definitions[schema["$ref"].rsplit("/", 1)[-1]], definitions)
        return {key: _inlined(value, definitions) for key, value in schema.items() if key != "$defs"}
    if isinstance(schema, list):
        return [_inlined(item, definitions) for item in schema]
    return schema


def _with_sampling_sizes(schema: dict[str, Any]) -> dict[str, Any]:
    """A schema of subword sampling options (SamplingOptions, or the spec's SamplingDefaults) with nbest_size as
    its validator takes it: -1, or 2 to MAX_NBEST (0 and 1 do not sample)."""
    schema["properties"]["nbest_size"]["anyOf"] = [
        {"type": "integer", "enum": [-1]}, {"type": "integer", "minimum": 2, "maximum": MAX_NBEST}, {"type": "null"}]
    return schema


def _self_contained(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    inlined: dict[str, Any] = _inlined(schema, schema.get("$defs", {}))
    return inlined


SAMPLING_SCHEMA = _with_sampling_sizes(_self_contained(SamplingOptions))
# The training spec as /docs shows it: every field with its description, bounds and default. The
# body is read as a plain object and checked by `resolve_spec`, whose 422s name the field
# (spec.vocab_size …) and say what a library cannot honour, which a schema alone cannot.
SPEC_SCHEMA = _self_contained(TrainingSpec)
_with_sampling_sizes(next(option for option in SPEC_SCHEMA["properties"]["sampling"]["anyOf"]
                          if option.get("type") == "object"))


# Corpus ids as a body names them: each a UUID of one of the team's corpora (an unknown one is a 422 naming the field).
CORPUS_IDS: dict[str, Any] = {"type": "array", "items": {"type": "string", "format": "uuid"}}
OPTIONAL_CORPUS_IDS: dict[str, Any] = {"anyOf": [CORPUS_IDS, {"type": "null"}]}


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokenizer: Annotated[str, WithJsonSchema(NAME_SCHEMA)] = Field(
        description="the name the version is registered under")
    spec: Annotated[dict[str, Any], WithJsonSchema(SPEC_SCHEMA)] = Field(default_factory=dict)
    train_corpora: Annotated[list[str], WithJsonSchema({**CORPUS_IDS, "minItems": 1})] = Field(
        description="the corpora to train on")
    eval_corpora: Annotated[list[str] | None, WithJsonSchema(OPTIONAL_CORPUS_IDS)] = Field(
        None, description="the corpora to evaluate the version on; null: all of the team's")


class JobOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    tokenizer: str
    status: str
    stage: str
    progress: float
    error: str | None
    attempts: int
    version: int | None
    spec: dict[str, Any]
    train_corpora: list[str] = Field(validation_alias="train_corpus_ids")
    eval_corpora: list[str] = Field(validation_alias="eval_corpus_ids")
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    reached_vocab_size: int | None = None  # its version's vocab_size, once it succeeded (see `of`)
    noted: dict[str, Any] | None = Field(None, exclude=True)  # its version's lineage, as far as the notes read it

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (pydantic's advice)
    @property
    def requested_vocab_size(self) -> int | None:
        return self.spec.get("vocab_size")

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (pydantic's advice)
    @property
    def notes(self) -> list[str]:
        """What a person should know of the job's result (a vocabulary smaller than asked for), as its version says."""
        if self.reached_vocab_size is None:
            return []
        return vocabulary_notes(self.spec, self.reached_vocab_size, self.noted)

    @classmethod
    def of(cls, session: Session, jobs: Sequence[TrainingJob]) -> list["JobOut"]:
        """The jobs as the API shows them, each succeeded one with the vocabulary size its version reached."""
        outcomes = version_outcomes(session, jobs)
        return [cls.model_validate(job).model_copy(update=dict(zip(
            ("reached_vocab_size", "noted"), outcomes.get(job.id, (None, None))))) for job in jobs]

    @classmethod
    def one(cls, session: Session, job: TrainingJob) -> "JobOut":
        """One job as the API shows it (see `of`)."""
        return cls.of(session, [job])[0]


class FileOut(BaseModel):
    name: str
    bytes: int
    sha256: str


class VersionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    name: str
    version: int
    spec: dict[str, Any]
    vocab_size: int
    files: list[FileOut]
    lineage: dict[str, Any]
    train_seconds: float
    peak_memory_bytes: int
    job_id: uuid.UUID | None
    created_at: datetime

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (pydantic's advice)
    @property
    def requested_vocab_size(self) -> int:
        requested: int = self.spec.get("vocab_size", self.vocab_size)
        return requested

    @computed_field  # type: ignore[prop-decorator]  # mypy cannot type a decorated property (pydantic's advice)
    @property
    def notes(self) -> list[str]:
        """What a person should know of this version (a vocabulary smaller than asked for)."""
        return vocabulary_notes(self.spec, self.vocab_size, self.lineage)


class TokenizerOut(BaseModel):
    name: str
    latest: int
    versions: int
    updated_at: datetime


class EvaluationIn(JsonTyped):
    """A version of the team's (`tokenizer`, `version`: the latest when left out) or a reference, evaluated on
    `corpora` (all of the team's when left out)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"oneOf": [
        {"required": ["tokenizer"], "properties": {"tokenizer": {"type": "string"}, "reference": {"type": "null"}}},
        {"required": ["reference"], "properties": {"reference": {"type": "string"}, "tokenizer": {"type": "null"}}},
    ]})

    tokenizer: Annotated[str | None, WithJsonSchema({"anyOf": [NAME_SCHEMA, {"type": "null"}]})] = None
    version: Annotated[int | str | None, WithJsonSchema({"anyOf": [*VERSION_SCHEMA["anyOf"], {"type": "null"}]})] = None
    reference: Annotated[str | None, WithJsonSchema({"anyOf": [{"type": "string", "enum": list(BASELINES)},
                                                               {"type": "null"}]})] = None
    corpora: Annotated[list[str] | None, WithJsonSchema(OPTIONAL_CORPUS_IDS)] = None
    whole: bool = Field(default=False, description=(
        "measure every document of each corpus (spread over workers when it is larger than a part), not the "
        "seeded sample an evaluation measures of a corpus larger than TOKENMILL_EVALUATION_SAMPLE_BYTES"))


class SamplingIn(JsonTyped, SamplingOptions):
    """SamplingOptions as a JSON body gives them: numbers as numbers (true is no seed, "0.1" no dropout)."""


class EncodeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(json_schema_extra={"maxLength": MAX_TEXT})
    # Subword regularisation (BPE-dropout, Unigram sampling): absent, the one best segmentation.
    sampling: Annotated[SamplingIn | None, WithJsonSchema(
        {"anyOf": [SAMPLING_SCHEMA, {"type": "null"}]})] = None


class SamplingOut(BaseModel):
    """How a sampled encode sampled: the options given, else the version's recorded ones, else ours."""

    method: Literal["bpe-dropout", "unigram"]
    seed: int
    dropout: float | MISSING = MISSING  # bpe-dropout
    alpha: float | MISSING = MISSING  # unigram
    nbest_size: int | MISSING = MISSING  # unigram


class EncodeOut(BaseModel):
    """One text as a tokenizer cuts it (no special tokens added); `sampling` only for a sampled encode."""

    tokenizer: str
    ids: list[int]
    tokens: list[str]
    offsets: list[tuple[int, int]] = Field(description="each token's character span [start, end) in the text")
    pieces: list[str] = Field(description="the text each token covers")
    count: int
    chars_per_token: float
    sampling: SamplingOut | MISSING = MISSING


Check = Literal["ok", "unavailable"]


class HealthChecks(BaseModel):
    database: Check
    broker: Check
    store: Check


class HealthOut(BaseModel):
    status: Check
    checks: HealthChecks


class QuotasOut(BaseModel):
    """A team's limits (tokenmill.quotas): the operator's figures where set, the defaults elsewhere."""

    storage_bytes: int = Field(description="corpora as stored (decompressed), in bytes")
    corpora: int
    queued_jobs: int = Field(description="training jobs waiting to start; evaluation runs count apart, same limit")
    running_jobs: int = Field(description="training jobs started at once; evaluation runs apart, same limit")
    concurrent_uploads: int
    requests_per_minute: int = Field(description="expensive requests per API key (token bucket)")


class UsageOut(BaseModel):
    storage_bytes: int
    corpora: int
    queued_jobs: int
    running_jobs: int
    queued_evaluations: int
    running_evaluations: int
    uploads_in_flight: int = Field(description="uploads streaming now through this API process")


class TeamOut(BaseModel):
    id: uuid.UUID
    name: str
    quotas: QuotasOut
    usage: UsageOut


class ScriptCountsOut(BaseModel):
    key: str = Field(description='"version", or a reference: gpt2, cl100k_base, o200k_base')
    label: str
    counts: dict[str, int] = Field(description="tokens per category (zeros left out), in `categories` order")
    total: int


class VocabularyOut(BaseModel):
    """Where a vocabulary's budget went, by script (tokenmill.playground.scripts), beside the references."""

    name: str
    version: int
    categories: list[str] = Field(description="the categories any subject has a token in, scripts first")
    subjects: list[ScriptCountsOut]
