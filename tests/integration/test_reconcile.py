"""Reconciliation deletes exactly the objects no row accounts for, and aborts stale uploads."""

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import update

from tokenmill.db import transaction, utcnow
from tokenmill.evaluation.parts import run_prefix
from tokenmill.jobs.pipeline import job_prefix, run_training_job
from tokenmill.jobs.reconcile import reconcile
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Corpus, EvaluationRun, TrainingJob
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.store import ObjectNotFound, open_store
from tokenmill.teams import create_team


@pytest.fixture
def own_store(settings):
    """A store of its own under the test bucket: reconciliation sees only this test's objects."""
    bucket = settings.storage_url.removeprefix("s3://").split("/")[0]
    return open_store(f"s3://{bucket}/reconcile-{uuid.uuid4().hex[:8]}", settings.s3_endpoint_url)


def keys(store) -> set[str]:
    return {stored.key for stored in store.list_objects("")}


def test_reconciliation_removes_orphans_and_keeps_what_rows_name(sessionmaker, own_store):
    store = own_store
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"rec-{uuid.uuid4().hex[:8]}")
    text = "".join(f"line {i} of a corpus to train on, words words\n" for i in range(200)).encode()
    corpus_key = f"corpora/{team.id}/{uuid.uuid4()}"
    store.put_bytes(corpus_key, text)
    with transaction(sessionmaker) as session:
        corpus = Corpus(team_id=team.id, name="c", domain="news", language="eng_Latn", format="text",
                        storage_key=corpus_key, sha256="0" * 64, bytes=len(text), lines=200, words=2000,
                        characters=len(text))
        session.add(corpus)
        session.flush()
        made, _ = submit_job(session, team, "rec", {"vocab_size": 400}, [str(corpus.id)], [])
        failed, _ = submit_job(session, team, "rec", {"vocab_size": 400}, [str(corpus.id)], [])
        running, _ = submit_job(session, team, "rec", {"vocab_size": 400}, [str(corpus.id)], [])
    assert run_training_job(sessionmaker, store, made.id, WorkLimits()) == "succeeded"
    with transaction(sessionmaker) as session:
        session.execute(update(TrainingJob).where(TrainingJob.id == failed.id).values(status="failed"))
        session.execute(update(TrainingJob).where(TrainingJob.id == running.id).values(status="running"))
    version_files = {k for k in keys(store) if k.startswith(f"versions/{team.id}/{made.id}/")}
    orphans = {
        f"corpora/{team.id}/{uuid.uuid4()}",  # a corpus deleted while the store was away
        f"{job_prefix(failed)}/tokenizer.json",  # a failed job's partial files
        f"versions/{team.id}/{uuid.uuid4()}/tokenizer.json",  # a job that no longer exists (or an import never registered)
        f"statistics/{team.id}/{uuid.uuid4()}.hashes",  # the hashes of a corpus deleted while the store was away
        f"{job_prefix(made)}/measures/1/0-1.npz",  # a measured part's sums, left by a store away when the job ended
    }
    vanished = next(k for k in orphans if k.startswith("versions/") and not k.startswith((job_prefix(failed), job_prefix(made))))
    hashes = next(k for k in orphans if k.startswith("statistics/"))
    kept = {corpus_key, f"{job_prefix(running)}/tokenizer.json", f"{job_prefix(running)}/measures/1/0-1.npz",
            "elsewhere/not-ours",
            f"statistics/{team.id}/{corpus.id}.hashes"} | version_files
    for key in orphans | (kept - version_files - {corpus_key}):
        store.put_bytes(key, b"x")
    upload = store.client.create_multipart_upload(Bucket=store.bucket, Key=store._key(f"corpora/{team.id}/{uuid.uuid4()}"))

    # Within the grace period an unnamed corpus object may be an upload about to be registered, and
    # a version object named by no row an import about to be. A failed job's files go at once, as do
    # an ended job's measured parts.
    # (moto dates every multipart upload 2010, so the upload counts as stale in both passes.)
    early = reconcile(sessionmaker, store, grace_seconds=3600)
    assert (early["corpus_objects"], early["version_objects"]) == (0, 2)
    assert keys(store) == kept | (orphans - {f"{job_prefix(failed)}/tokenizer.json", f"{job_prefix(made)}/measures/1/0-1.npz"})
    assert vanished in keys(store) and hashes in keys(store)

    result = reconcile(sessionmaker, store, grace_seconds=-1)
    assert (result["corpus_objects"], result["version_objects"], result["hash_objects"]) == (1, 1, 1)
    assert early["aborted_uploads"] + result["aborted_uploads"] == 1
    assert keys(store) == kept
    uploads = store.client.list_multipart_uploads(Bucket=store.bucket).get("Uploads", [])
    assert upload["UploadId"] not in {u["UploadId"] for u in uploads}
    assert reconcile(sessionmaker, store, grace_seconds=-1) == {"corpus_objects": 0, "version_objects": 0,
                                                                "hash_objects": 0, "evaluation_objects": 0,
                                                                "aborted_uploads": 0}
    with pytest.raises(ObjectNotFound):
        store.get_bytes(f"{job_prefix(failed)}/tokenizer.json")


def test_an_evaluation_runs_parts_are_kept_while_it_runs(sessionmaker, own_store):
    # The recipe and sums of a corpus measured in parts (tokenmill.evaluation.parts).
    store = own_store
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"rec-{uuid.uuid4().hex[:8]}")
        runs = {status: EvaluationRun(team_id=team.id, reference="gpt2", corpus_ids=[], status=status)
                for status in ("running", "failed")}
        session.add_all(runs.values())
    running, failed = (f"{run_prefix(runs[status].id)}1/0-1.npz" for status in ("running", "failed"))
    vanished = f"{run_prefix(uuid.uuid4())}1/{uuid.uuid4()}/recipe.json"  # a run deleted meanwhile
    for key in (running, failed, vanished):
        store.put_bytes(key, b"x")
    assert reconcile(sessionmaker, store, grace_seconds=3600)["evaluation_objects"] == 1
    assert keys(store) == {running, vanished}
    assert reconcile(sessionmaker, store, grace_seconds=-1)["evaluation_objects"] == 1
    assert keys(store) == {running}


def test_local_store_reconciles_the_same_way(sessionmaker, tmp_path):
    store = open_store(f"file://{tmp_path}")
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"rec-{uuid.uuid4().hex[:8]}")
    orphan = f"corpora/{team.id}/{uuid.uuid4()}"
    store.put_bytes(orphan, b"x")
    # The local store dates its objects (aware, recent), as the grace period needs.
    [listed] = store.list_objects("")
    assert listed.modified.tzinfo is not None and listed.modified > utcnow() - timedelta(days=1)
    partial = tmp_path / "corpora" / str(team.id) / ".part-abc"
    partial.write_bytes(b"half an upload")
    assert reconcile(sessionmaker, store, grace_seconds=-1) == {"corpus_objects": 1, "version_objects": 0,
                                                                "hash_objects": 0, "evaluation_objects": 0,
                                                                "aborted_uploads": 1}
    assert keys(store) == set() and not partial.exists()
