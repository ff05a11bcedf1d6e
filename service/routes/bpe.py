"""/v1/bpe/steps: BPE one merge at a time, on a small corpus or a stored version's merges on a sample.

With `corpus` (or nothing: the seed article's corpus), BPE learns on it and every step's state
comes back (tokenmill.bpe_steps). With `tokenizer` (+ `version`, `corpus_id`), the team's
version replays its first merges on the first `lines` lines of one of the team's corpora
(tokenmill.bpe_replay); another team's name or id is a 404, as everywhere.

The answer: `merges` (all of them, in order), `vocabulary` (the final one: the alphabet by code
point, then each merge's token), and `states` from `start` to the last step asked for. A
state's vocabulary is the first `vocabulary_size` entries and its merges the first `step`
merges, so neither is repeated per step. When a corpus is too large for every state in one
answer, `next_start` says where to ask again.
"""

import uuid
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from service.deps import SessionDep, StoreDep, TeamDep
from service.routes.corpora import get_corpus
from tokenmill.bpe_replay import MAX_SAMPLE_LINES, SAMPLE_LINES, version_steps
from tokenmill.bpe_steps import (DEFAULT_CORPUS, END_OF_WORD, MAX_CHARACTERS, MAX_STEPS, MIN_COUNT, TIE_BREAKS, Merge,
                                 Run, State, step_through)
from tokenmill.errors import InvalidInput
from tokenmill.models import Team
from tokenmill.store import ObjectStore
from tokenmill.versions import get_version

router = APIRouter(prefix="/v1/bpe", tags=["bpe"])

CORPUS_FIELDS = ("corpus", "tie_break", "end_of_word", "min_count")
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


def merge_json(merge: Merge) -> dict[str, Any]:
    return {"pair": list(merge.pair), "token": merge.token, "count": merge.count,
            "tied": [list(pair) for pair in merge.tied], "ties": merge.ties}


def state_json(state: State, replaying: bool = False) -> dict[str, Any]:
    """One state; in a replay, `next` also has its `rank` among the sample's pairs (null: not in the sample)."""
    following = merge_json(state.next) if state.next else None
    if following is not None and replaying:
        ranks = (i for i, (pair, _) in enumerate(state.pairs, start=1) if pair == state.next.pair)
        following["rank"] = next(ranks, None)
    return {"step": state.step, "vocabulary_size": state.vocabulary_size,
            "words": [{"tokens": list(word.tokens), "count": word.count} for word in state.words],
            "pairs": [{"pair": list(pair), "count": count} for pair, count in state.pairs],
            "next": following}


def run_json(run: Run, replaying: bool = False) -> dict[str, Any]:
    return {"total_steps": len(run.merges), "done": run.done, "next_start": run.next_start,
            "merges": [merge_json(merge) for merge in run.merges], "vocabulary": list(run.vocabulary),
            "states": [state_json(state, replaying) for state in run.states]}


def compute(session, store: ObjectStore, team: Team, body: BpeStepsIn,
            count: int | None = None) -> tuple[Run, dict[str, Any]]:
    """The run a body asks for (at most `count` states), and what it was computed on."""
    check_fields(body)
    if body.tokenizer is None:
        run = step_through(DEFAULT_CORPUS if body.corpus is None else body.corpus, body.steps, body.tie_break,
                           body.end_of_word, body.min_count, body.start, count)
        return run, {"mode": "corpus", "tie_break": body.tie_break, "tie_break_label": TIE_BREAKS[body.tie_break],
                     "end_of_word": END_OF_WORD if body.end_of_word else None, "min_count": body.min_count}
    row = get_version(session, team, body.tokenizer, body.version)
    corpus = get_corpus(session, team, body.corpus_id)
    session.commit()  # reading the store and splitting the sample: hold no database connection meanwhile
    run, sample = version_steps(store, row, corpus, body.steps, body.lines, body.start, count)
    return run, {"mode": "version", "tokenizer": row.name, "version": row.version, "corpus_id": str(corpus.id),
                 "corpus_name": corpus.name,
                 "sample": {"lines": len(sample.texts), "characters": sample.characters, "truncated": sample.truncated}}


@router.post("/steps")
def steps(body: BpeStepsIn, session: SessionDep, store: StoreDep, team: TeamDep):
    """Every step's state: the words as tokens, all pair counts (ranked), the merge, the vocabulary so far.

    A version's sample is split in a sandbox process first: all of them busy is a 503 with Retry-After.
    """
    run, about = compute(session, store, team, body)
    return {**about, **run_json(run, replaying=about["mode"] == "version")}
