"""Helpers of the upload tests: one upload through either face, a dashboard session, and what a team has stored."""

import io
import uuid

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from tests.api.dashboard import sign_in
from tokenmill.models import Corpus

FIELDS = {"name": "upload", "domain": "news", "language": "eng_Latn"}


def signed_in(app_client, api) -> tuple[TestClient, str]:
    """A dashboard session of the team the `api` fixture is authenticated as, and its CSRF token."""
    client = TestClient(app_client.app, follow_redirects=False)
    return client, sign_in(client, api.headers["Authorization"].removeprefix("Bearer "))


def post_api(api, data: bytes, filename: str, fields: dict[str, str]):
    """POST /v1/corpora, the fields before the file."""
    return api.post("/v1/corpora", data={**FIELDS, **fields}, files={"file": (filename, io.BytesIO(data))})


def post_dashboard(browser: tuple[TestClient, str], data: bytes, filename: str, fields: dict[str, str],
                   as_json: bool = True):
    """POST /corpora as the page's form sends it (problem+json when `as_json`, as its script asks)."""
    client, token = browser
    headers = {"Accept": "application/json"} if as_json else {}
    return client.post("/corpora", data={"csrf_token": token, **FIELDS, **fields},
                       files={"file": (filename, io.BytesIO(data))}, headers=headers)


def stored(store, sessionmaker, team_id: uuid.UUID) -> tuple[set[str], int, int]:
    """The team's objects, its unfinished multipart uploads and its corpus rows."""
    prefix = f"{store.prefix}/corpora/{team_id}/"
    objects = store.client.list_objects_v2(Bucket=store.bucket, Prefix=prefix).get("Contents", [])
    unfinished = store.client.list_multipart_uploads(Bucket=store.bucket, Prefix=prefix).get("Uploads", [])
    with sessionmaker() as session:
        rows = session.scalar(select(func.count()).select_from(Corpus).where(Corpus.team_id == team_id))
    return {item["Key"] for item in objects}, len(unfinished), rows
