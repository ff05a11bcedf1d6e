"""The dashboard's new-job form and its idempotency key: a resubmission is one job, a changed one a fresh key."""

import io
import re

from fastapi.testclient import TestClient

from tests.api.dashboard import sign_in
from tests.conftest import make_team


def test_a_changed_form_under_a_spent_key_gets_a_fresh_key(app_client, sessionmaker):
    _, key = make_team(sessionmaker)
    client = TestClient(app_client.app, follow_redirects=False)
    corpus = client.post("/v1/corpora", data={"name": "c", "domain": "web", "language": "en"},
                         files={"file": ("c.txt", io.BytesIO(b"words and more words\n"))},
                         headers={"Authorization": f"Bearer {key}"}).json()
    token = sign_in(client, key)
    form = {"csrf_token": token, "tokenizer": "web", "spec.vocab_size": "1000", "train_corpora": corpus["id"],
            "idempotency_key": "form-1"}
    assert client.post("/jobs/new", data=form).status_code == 303
    assert client.post("/jobs/new", data=form).status_code == 303  # the same form again: the same job
    changed = client.post("/jobs/new", data={**form, "spec.vocab_size": "2000"})
    assert changed.status_code == 422 and "Idempotency-Key" in changed.text
    fresh = re.search(r'name="idempotency_key" value="([^"]+)"', changed.text).group(1)
    assert fresh != "form-1"
    assert client.post("/jobs/new", data={**form, "spec.vocab_size": "2000", "idempotency_key": fresh}).status_code == 303
    jobs = client.get("/v1/jobs", headers={"Authorization": f"Bearer {key}"}).json()
    assert sorted(job["spec"]["vocab_size"] for job in jobs["items"]) == [1000, 2000]
