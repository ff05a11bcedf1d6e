"""Response body of GET /v1/tokenizers/{name}/versions/{version}/report (tokenmill.playground.cost_report).

Every section is keyed by subject: "version", then the references ("gpt2", "cl100k_base",
"o200k_base"); a subject missing from a mapping was not measured (see `unavailable`).
"""

import uuid
from typing import Literal

from pydantic import BaseModel, Field


class CostSubject(BaseModel):
    key: str
    kind: Literal["version", "reference"]
    label: str
    vocab_size: int


class ReportCorpus(BaseModel):
    id: uuid.UUID
    name: str
    domain: str
    language: str
    parallel_group: str | None


class TaxLanguage(BaseModel):
    language: str
    corpus_id: uuid.UUID
    corpus: str
    premium: dict[str, float] = Field(description="by subject: tokens / tokens of the pivot")


class TaxGroup(BaseModel):
    group: str
    pivot: str | None
    languages: list[TaxLanguage] = Field(description="the pivot first")


class LanguageValues(BaseModel):
    language: str
    values: dict[str, float | None] = Field(description="by subject (null: no words or tokens to divide by)")


class LanguageTax(BaseModel):
    groups: list[TaxGroup]
    chars_per_token: list[LanguageValues]


class GhostToken(BaseModel):
    id: int
    count: int
    token: str


class GhostCount(BaseModel):
    corpora: int = Field(description="corpora whose evaluation kept per-id counts")
    of_corpora: int
    tokens: int


class GhostsUnavailable(GhostCount):
    available: Literal[False]


class Ghosts(GhostCount):
    """Vocabulary entries seen fewer than `clip` times over the corpora."""

    available: Literal[True]
    entries: int
    never: int
    rare: int
    learned_never: int
    learned_rare: int
    base_never: int
    never_share: float
    rare_share: float
    listed: list[GhostToken]


class GhostTokens(BaseModel):
    clip: int
    subjects: dict[str, Ghosts | GhostsUnavailable]


class Cut(BaseModel):
    """A fixed text and the pieces its tokens cover."""

    text: str
    pieces: list[str]
    tokens: int


class GroupingLength(BaseModel):
    digits: int
    pattern: str = Field(description='the most common split, e.g. "3+1"')
    share: float
    patterns: int
    numbers: int


class DigitGrouping(BaseModel):
    consistency: float
    lengths: list[GroupingLength]


class Numbers(BaseModel):
    items: list[Cut]
    digit_grouping: DigitGrouping


class IndentCut(Cut):
    label: str
    indent_tokens: int = Field(description="tokens on top of the unindented line")


class TrailingSpace(BaseModel):
    without: Cut
    with_: Cut = Field(alias="with")
    extra_tokens: int
    last_piece: str


class WordPieces(BaseModel):
    items: list[Cut]
    split_share: float


class LettersHidden(BaseModel):
    words: dict[str, WordPieces]
    continued_word_rate: list[LanguageValues]


class CostReportOut(BaseModel):
    name: str
    version: int
    subjects: list[CostSubject]
    corpora: list[ReportCorpus]
    language_tax: LanguageTax
    ghost_tokens: GhostTokens
    numbers: dict[str, Numbers]
    indentation: dict[str, list[IndentCut]]
    trailing_space: dict[str, TrailingSpace]
    letters_hidden: LettersHidden
    unavailable: dict[str, str] = Field(description="by subject: why its fixed texts could not be encoded")
