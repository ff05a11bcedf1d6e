"""A team sees only its own rows: another team's version, corpus and job answer 404 pages."""

import uuid

import httpx
import pytest

from tests.conftest import make_team
from tokenmill.db import transaction
from tokenmill.models import TokenizerVersion, TrainingJob


@pytest.fixture
def owner_rows(stack, sessionmaker):
    """Another team's corpus (uploaded), version and job (written to the database)."""
    owner, key = make_team(sessionmaker)
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {key}"}) as client:
        corpus = client.post("/v1/corpora", data={"name": "secret", "domain": "news", "language": "eng_Latn"},
                             files={"file": ("secret.txt", b"private text of the owner\n")}).json()
    name = f"owned-{uuid.uuid4().hex[:6]}"
    with transaction(sessionmaker) as session:
        job = TrainingJob(team_id=owner.id, tokenizer=name, spec={}, train_corpus_ids=[corpus["id"]],
                          eval_corpus_ids=[], status="queued")
        session.add(job)
        session.add(TokenizerVersion(team_id=owner.id, name=name, version=1, spec={"algorithm": "bpe"}, vocab_size=300,
                                     files=[], lineage={}, train_seconds=1.0, peak_memory_bytes=1))
    return {"name": name, "corpus": corpus["id"], "job": str(job.id)}


def test_another_teams_resources_answer_404(browse, team, owner_rows):
    page, console = browse(key=team.key)
    name = owner_rows["name"]
    for path in (f"/tokenizers/{name}/versions/1", f"/tokenizers/{name}/versions/latest",
                 f"/tokenizers/{name}/versions/1/files/tokenizer.json", f"/corpora/{owner_rows['corpus']}"):
        console.allow(404, path)
        response = page.goto(path)
        assert response.status == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert page.get_by_role("heading", level=1).inner_text() == "404 · Not found"
        # Nothing of the owner's shows on any of them: not its corpus's name, nor its text.
        content = page.content()
        assert "private text of the owner" not in content and "secret" not in content, path

    # The page's script endpoints answer 404 too, as problem+json.
    page.goto("/")
    csrf = page.locator('meta[name="csrf-token"]').get_attribute("content")
    status = page.request.get(f"/jobs/{owner_rows['job']}/status", headers={"Accept": "application/json"})
    assert status.status == 404 and status.json()["status"] == 404
    encode = page.request.post("/playground/encode", data={"text": "hi", "target": f"version:{name}@1"},
                               headers={"Accept": "application/json", "X-CSRF-Token": csrf})
    assert encode.status == 404
    cancel = page.request.post(f"/jobs/{owner_rows['job']}/cancel", form={"csrf_token": csrf})
    assert cancel.status == 404
