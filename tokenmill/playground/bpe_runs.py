"""A BPE step-through request, checked, and the run it asks for: BPE learning on a typed corpus
(tokenmill.playground.bpe_steps), or a stored version replaying its first merges on a sample of one of the
team's corpora (tokenmill.playground.bpe_replay). POST /v1/bpe/steps and the /bpe page both call `compute`.
Either is pure Python work on request data: it runs in a sandbox process, on the team's share of the pool."""

import uuid
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from tokenmill.corpora.rows import get_corpus
from tokenmill.errors import InvalidInput, SandboxError, TimedOut
from tokenmill.models import Team
from tokenmill.playground.bpe_replay import MAX_SAMPLE_LINES, SAMPLE_LINES, version_sample
from tokenmill.playground.bpe_steps import (
    DEFAULT_CORPUS,
    END_OF_WORD,
    MAX_CHARACTERS,
    MAX_STEPS,
    MIN_COUNT,
    TIE_BREAKS,
    Run,
)
from tokenmill.sandboxed import sandbox
from tokenmill.store import ObjectStore
from tokenmill.versions.registry import get_version

CORPUS_FIELDS = ("corpus", "tie_break", "end_of_word", "min_count")
STEPS_SECONDS = 15.0  # one step-through (learning or replaying), in a sandbox process
VERSION_FIELDS = ("version", "corpus_id", "lines")


class BpeStepsIn(BaseModel):
    """Either a corpus to learn on, or a stored version (+ one of the team's corpora) to replay."""

    model_config = ConfigDict(extra="forbid")

    corpus: str | None = Field(None, max_length=MAX_CHARACTERS, description="whitespace-separated words")
    steps: int = Field(MAX_STEPS, ge=0, le=MAX_STEPS, description="merges to make (or replay), at most")
    start: int = Field(0, ge=0, le=MAX_STEPS, description="the first state to return")
    tie_break: Literal["first_seen", "tokenizers"] = "first_seen"
    end_of_word: bool = Field(True, description=f"end each word with the marker {END_OF_WORD!r}, a symbol of its own")
    min_count: int = Field(MIN_COUNT, ge=1, le=2**31 - 1, description="stop when no pair occurs this often")
    tokenizer: str | None = Field(None, min_length=1, max_length=200)
    version: int | str = "latest"
    corpus_id: uuid.UUID | None = None
    lines: int = Field(SAMPLE_LINES, ge=1, le=MAX_SAMPLE_LINES, description="lines of the corpus to sample")


def check_fields(body: BpeStepsIn) -> None:
    """Refuse a body that mixes the two kinds of request, naming the field that does not belong."""
    sent = body.model_fields_set
    if body.tokenizer is None:
        if stray := next((name for name in VERSION_FIELDS if name in sent), None):
            raise InvalidInput(f"'{stray}' goes with 'tokenizer': name the version to replay", field=stray)
        return
    if stray := next((name for name in CORPUS_FIELDS if name in sent), None):
        raise InvalidInput(f"'{stray}' does not apply to a stored version, which replays its own merges: "
                           "send 'tokenizer' or 'corpus', not both", field=stray)
    if body.corpus_id is None:
        raise InvalidInput("'corpus_id' is required with 'tokenizer': the corpus to sample", field="corpus_id")


def bounded(field: str, target: str, owner: str, *args: Any) -> Any:
    """A run computed in a sandbox process on the team's share (pure Python, and a version's regex
    may backtrack): past STEPS_SECONDS or the sandbox's memory it is a 422 naming `field`."""
    pool = sandbox.current()
    try:
        run = pool.call(target, *args, timeout=STEPS_SECONDS, owner=owner)
    except TimedOut:
        raise InvalidInput(f"these steps took longer than {STEPS_SECONDS:g}s (a long corpus, many steps, or a "
                           "pre-tokenization regex that backtracks): ask for fewer steps or a shorter text",
                           field=field) from None
    except SandboxError as exc:
        raise InvalidInput(f"these steps could not be computed ({exc})", field=field) from None
    return run


def compute(session: Session, store: ObjectStore, team: Team, body: BpeStepsIn, release: Callable[[], None],
            count: int | None = None, as_json: bool = False) -> tuple[Run | str, dict[str, Any]]:
    """The run a body asks for (at most `count` states), and what it was computed on; with
    `as_json`, the run as the JSON text of tokenmill.playground.bpe_json, built where it was computed.
    A version's run reads its rows, then calls `release` (tokenmill.db.release) before the store and the sandbox."""
    check_fields(body)
    owner = str(team.id)
    if body.tokenizer is None:
        run = bounded("corpus", "tokenmill.playground.bpe_json:steps_text" if as_json else
                      "tokenmill.playground.bpe_steps:step_through", owner,
                      DEFAULT_CORPUS if body.corpus is None else body.corpus, body.steps, body.tie_break,
                      body.end_of_word, body.min_count, body.start, count)
        return run, {"mode": "corpus", "tie_break": body.tie_break, "tie_break_label": TIE_BREAKS[body.tie_break],
                     "end_of_word": END_OF_WORD if body.end_of_word else None, "min_count": body.min_count}
    row = get_version(session, team, body.tokenizer, body.version)
    assert body.corpus_id is not None  # check_fields refuses a version's body without it
    corpus = get_corpus(session, team, body.corpus_id)
    release()
    tokenizer_json, sample = version_sample(store, row, corpus, body.lines)
    run = bounded("corpus_id", "tokenmill.playground.bpe_json:replay_text" if as_json else
                  "tokenmill.playground.bpe_replay:replayed", owner, tokenizer_json, sample.texts,
                  body.steps, body.start, count)
    return run, {"mode": "version", "tokenizer": row.name, "version": row.version, "corpus_id": str(corpus.id),
                 "corpus_name": corpus.name,
                 "sample": {"lines": len(sample.texts), "characters": sample.characters, "truncated": sample.truncated}}
