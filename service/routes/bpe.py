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

import json
from typing import Any

from fastapi import APIRouter, Response

from service.deps import BpeStepsTeamDep, SessionDep, StoreDep
from service.schemas_bpe import BpeStepsOut, BpeStepsRequest
from tokenmill.db import release
from tokenmill.playground.bpe_runs import compute

router = APIRouter(prefix="/v1/bpe", tags=["bpe"])


# A version's run names the version and the corpus it samples: either may not be the team's.
NAMED_ROWS: dict[int | str, dict[str, Any]] = {404: {"description": "no such version, or corpus, of the team's"}}


@router.post("/steps", response_model=BpeStepsOut, responses=NAMED_ROWS)
def steps(body: BpeStepsRequest, session: SessionDep, store: StoreDep, team: BpeStepsTeamDep) -> Response:
    """Every step's state: the words as tokens, all pair counts (ranked), the merge, the vocabulary so far.

    A version's sample is split in a sandbox process first: all of them busy is a 503 with Retry-After.
    """
    built, about = compute(session, store, team, body, lambda: release(session), as_json=True)
    # The states' JSON is built in the sandbox process that computed them and sent as it comes (the shape
    # BpeStepsOut declares: tests/api/test_typed_responses.py holds it): a few megabytes built or validated
    # here would hold this process, and every other team's reads, for a second.
    assert isinstance(built, str)
    return Response(f"{json.dumps(about, ensure_ascii=False)[:-1]}, {built[1:]}".encode(), media_type="application/json")
