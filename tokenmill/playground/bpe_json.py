"""A BPE step-through run as the JSON POST /v1/bpe/steps answers (service.schemas_bpe.BpeStepsOut
declares it): built in the sandbox process that computed the run (tokenmill.playground.bpe_runs), so
the API process only passes the text on."""

import json
from typing import Any

from tokenmill.playground.bpe_replay import replayed
from tokenmill.playground.bpe_steps import Merge, Run, State, step_through


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


def steps_text(*args: Any) -> str:
    """`step_through(*args)` as JSON text."""
    return json.dumps(run_json(step_through(*args)), ensure_ascii=False)


def replay_text(*args: Any) -> str:
    """`replayed(*args)` as JSON text (with each next merge's rank among the sample's pairs)."""
    return json.dumps(run_json(replayed(*args), replaying=True), ensure_ascii=False)
