"""Request and response bodies of POST /v1/bpe/steps (service/routes/bpe.py): BPE learning on a corpus, or a
stored version replaying its merges on a sample; `mode` says which."""

import uuid
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel, WithJsonSchema

from service.inputs import NOT_BLANK
from service.parameters import VERSION_SCHEMA, JsonTyped
from tokenmill.playground.bpe_runs import CORPUS_FIELDS, VERSION_FIELDS, BpeStepsIn

Pair = tuple[str, str]


class MergeOut(BaseModel):
    pair: Pair
    token: str
    count: int = Field(description="the pair's count (in a replay, on the sample)")
    tied: list[Pair] = Field(description="the first equally frequent pairs it won over, in the rule's order")
    ties: int


class ReplayedMerge(MergeOut):
    rank: int | None = Field(description="where the sample ranks the version's merge (1: first), null: not in it")


class WordOut(BaseModel):
    tokens: list[str]
    count: int


class PairCount(BaseModel):
    pair: Pair
    count: int


class StateOut(BaseModel):
    """The corpus after `step` merges; its vocabulary is the first `vocabulary_size` entries of the
    run's, its merges the first `step` of the run's."""

    step: int
    vocabulary_size: int
    words: list[WordOut]
    pairs: list[PairCount] = Field(description="every adjacent pair, in the rule's order")
    next: MergeOut | None


class ReplayedState(StateOut):
    next: ReplayedMerge | None


S = TypeVar("S", bound=StateOut)  # a run's states: StateOut learning on a corpus, ReplayedState replaying a version


class RunOut(BaseModel, Generic[S]):
    total_steps: int
    done: bool = Field(description="the merges ran out before `steps`")
    next_start: int | None = Field(description="where to ask again, when this answer was cut short")
    merges: list[MergeOut]
    vocabulary: list[str] = Field(description="the final one: the alphabet by code point, then each merge's token")
    states: list[S]


class CorpusSteps(RunOut[StateOut]):
    mode: Literal["corpus"]
    tie_break: Literal["first_seen", "tokenizers"]
    tie_break_label: str
    end_of_word: str | None = Field(description="the end-of-word marker, null without one")
    min_count: int


class SampleOut(BaseModel):
    lines: int
    characters: int
    truncated: bool


class VersionSteps(RunOut[ReplayedState]):
    mode: Literal["version"]
    tokenizer: str
    version: int
    corpus_id: uuid.UUID
    corpus_name: str
    sample: SampleOut


class BpeStepsOut(RootModel[Annotated[CorpusSteps | VersionSteps, Field(discriminator="mode")]]):
    pass


def _one_kind(schema: dict[str, Any]) -> None:
    # check_fields's rule: a corpus to learn on (no version's fields), or a version with the corpus to sample;
    # a corpus holds a word (something else than spaces).
    schema["properties"]["corpus"]["anyOf"][0]["pattern"] = NOT_BLANK
    schema["anyOf"] = [
        {"properties": {"tokenizer": {"type": "null"}},
         "not": {"anyOf": [{"required": [name]} for name in VERSION_FIELDS]}},
        {"required": ["tokenizer", "corpus_id"],
         "properties": {"tokenizer": {"type": "string"}, "corpus_id": {"type": "string"}},
         "not": {"anyOf": [{"required": [name]} for name in CORPUS_FIELDS]}},
    ]


class BpeStepsRequest(JsonTyped, BpeStepsIn):
    """Either a corpus to learn on (or none: the seed article), or a stored version (`tokenizer`, `version`) to
    replay on `lines` lines of one of the team's corpora (`corpus_id`): the fields of one kind only."""

    model_config = ConfigDict(json_schema_extra=_one_kind)

    version: Annotated[int | str, WithJsonSchema(VERSION_SCHEMA)] = "latest"
