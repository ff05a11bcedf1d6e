"""/v1/bpe/steps: BPE one merge at a time, on a small corpus or a stored version's merges on a sample.

With `corpus` (or nothing: the seed article's corpus), BPE learns on it and every step's state
comes back (tokenmill.playground.bpe_steps). With `tokenizer` (+ `version`, `corpus_id`), the team's
version replays its first merges on the first `lines` lines of one of the team's corpora
(tokenmill.playground.bpe_replay); another team's name or id is a 404, as everywhere.

The answer: `merges` (all of them, in order), `vocabulary` (the final one: the alphabet by code
point, then each merge's token), and `states` from `start` to the last step asked for. A
state's vocabulary is the first `vocabulary_size` entries and its merges the first `step`
merges, so neither is repeated per step. When a corpus is too large for every state in one
answer, `next_start` says where to ask again.
"""

from typing import Any

from fastapi import APIRouter

from service.deps import ExpensiveTeamDep, SessionDep, StoreDep
from service.schemas_bpe import BpeStepsOut
from tokenmill.playground.bpe_runs import BpeStepsIn, compute
from tokenmill.playground.bpe_steps import Merge, Run, State

router = APIRouter(prefix="/v1/bpe", tags=["bpe"])


def merge_json(merge: Merge) -> dict[str, Any]:
    return {"pair": list(merge.pair), "token": merge.token, "count": merge.count,
            "tied": [list(pair) for pair in merge.tied], "ties": merge.ties}


def state_json(state: State, replaying: bool = False) -> dict[str, Any]:
    """One state; in a replay, `next` also has its `rank` among the sample's pairs (null: not in the sample)."""
    following = merge_json(state.next) if state.next else None
    if following is not None and replaying:
        following["rank"] = state.next_rank
    return {"step": state.step, "vocabulary_size": state.vocabulary_size,
            "words": [{"tokens": list(word.tokens), "count": word.count} for word in state.words],
            "pairs": [{"pair": list(pair), "count": count} for pair, count in state.pairs],
            "next": following}


def run_json(run: Run, replaying: bool = False) -> dict[str, Any]:
    return {"total_steps": len(run.merges), "done": run.done, "next_start": run.next_start,
            "merges": [merge_json(merge) for merge in run.merges], "vocabulary": list(run.vocabulary),
            "states": [state_json(state, replaying) for state in run.states]}


@router.post("/steps", response_model=BpeStepsOut)
def steps(body: BpeStepsIn, session: SessionDep, store: StoreDep, team: ExpensiveTeamDep):
    """Every step's state: the words as tokens, all pair counts (ranked), the merge, the vocabulary so far.

    A version's sample is split in a sandbox process first: all of them busy is a 503 with Retry-After.
    """
    run, about = compute(session, store, team, body)
    return {**about, **run_json(run, replaying=about["mode"] == "version")}
