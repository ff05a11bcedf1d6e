"""Fair scheduling on the real worker (one slot): a team's backlog delays another team's next job
by one slot at most, instead of the whole backlog (tokenmill/queued_work/scheduling.py)."""

from datetime import datetime

import httpx

from tests.conftest import make_team
from tests.e2e.test_walking_skeleton import multilingual_corpus, submit
from tests.stack import unique
from tests.waiting import UNFINISHED, until

BACKLOG = 5


def upload(http) -> str:
    return http.post("/v1/corpora", data={"name": "tiny", "domain": "news", "language": "mul"},
                     files={"file": ("tiny.txt", multilingual_corpus(40))}).json()["id"]


def test_another_teams_job_starts_before_a_backlog_drains(http, stack, sessionmaker):
    _, other_key = make_team(sessionmaker)
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {other_key}"}, timeout=120) as other:
        mine, theirs = upload(http), upload(other)
        backlog = [submit(http, unique("backlog"), mine, vocab_size=300).json()["id"] for _ in range(BACKLOG)]
        late = submit(other, unique("late"), theirs, vocab_size=300).json()["id"]
        jobs = until(lambda: [http.get(f"/v1/jobs/{job}").json() for job in backlog] + [other.get(f"/v1/jobs/{late}").json()],
                     lambda jobs: all(job["status"] not in UNFINISHED for job in jobs), 300)
    assert all(job["status"] == "succeeded" for job in jobs), jobs
    *queued_first, last = [{key: datetime.fromisoformat(job[key]) for key in ("created_at", "started_at")} for job in jobs]
    # Jobs of the backlog that started after the late job was queued and before it started: under
    # FIFO the rest of the backlog; under fair turns none, or one if a slot's pick raced the submission.
    ahead = [job for job in queued_first if last["created_at"] < job["started_at"] < last["started_at"]]
    assert len(ahead) <= 1, (last, queued_first)  # FIFO: BACKLOG - 1
    assert last["started_at"] < max(job["started_at"] for job in queued_first)
