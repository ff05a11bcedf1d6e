"""A corpus measured whole by several workers (tokenmill.evaluation.parts), on PostgreSQL and S3, for
an evaluation run and for a training job's own evaluation: any number of workers and parts give the
metrics of one pass, a part left by a dead helper is measured again, and nothing is left behind."""

import json
import threading
import uuid

import pytest
from sqlalchemy import func, select

from tests.services import FIXTURES
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.evaluation.encoders import encoding_threads, reference_encoder
from tokenmill.evaluation.measuring import evaluate_version, measure_corpus
from tokenmill.evaluation.parts import MeasureHelpers, measure_claimed_parts, run_prefix
from tokenmill.evaluation.pipeline import run_evaluation
from tokenmill.evaluation.references import BASELINES
from tokenmill.evaluation.submission import run_out, submit_run
from tokenmill.jobs.pipeline import job_prefix, run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import Evaluation, EvaluationRun, JobMeasurePart, MeasurePart, Team, TokenizerVersion, TrainingJob
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.parts import MEASURING, claim_part
from tokenmill.teams import create_team
from tokenmill.versions.registry import version_files

LIMITS = {"max_bytes": 10**9, "max_line_bytes": 10**6}
PART_BYTES = 16_000


@pytest.fixture(scope="module")
def team_corpus_versions(sessionmaker, store):
    """A team, a 3-language corpus of about 400 KB, and two versions: byte-level BPE and WordPiece."""
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"parts-{uuid.uuid4().hex[:8]}")
    text = "\n".join(flores_lines(1000, languages=("eng_Latn", "deu_Latn", "zho_Hans"))).encode()
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("mix", "news", "eng_Latn"), [text], **LIMITS)
    code = ingest_corpus(sessionmaker, store, team, CorpusFields("python", "code", "python"),
                         [(FIXTURES / "code" / "python.txt").read_bytes()[:100_000]], **LIMITS)
    versions = {}
    for name, spec in (("bpe", {"vocab_size": 1500}), ("wordpiece", {"algorithm": "wordpiece",
                                                                      "vocab_size": 1500})):
        with transaction(sessionmaker) as session:
            job, _ = submit_job(session, team, f"parts-{name}", spec, [str(corpus.id)], [])
        assert run_training_job(sessionmaker, store, job.id) == "succeeded"
        with sessionmaker() as session:
            versions[name] = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id)).one()
    return team, [corpus, code], versions


def _one_pass(store, corpora, version, reference) -> dict:
    """Each corpus's metrics measured in this process, in one pass."""
    if version is not None:
        return {corpus.id: metrics for corpus, metrics in
                evaluate_version(store, version.name, version_files(store, version), corpora, lambda _: None, curve=False)}
    encoder = reference_encoder(reference)
    with encoding_threads():
        return {corpus.id: measure_corpus(encoder, store, corpus) for corpus in corpora}


def _run(sessionmaker, store, team, corpora, version, reference, limits, helpers) -> uuid.UUID:
    with transaction(sessionmaker) as session:
        owner = session.get_one(Team, team.id)
        run = submit_run(session, owner, version.name if version else None, version.version if version else None,
                         reference, [str(corpus.id) for corpus in corpora])
    assert run_evaluation(sessionmaker, store, run.id, limits, helpers) == "succeeded"
    return run.id


def _run_metrics(sessionmaker, store, run_id) -> dict:
    with sessionmaker() as session:
        rows = session.scalars(select(Evaluation).where(Evaluation.run_id == run_id)).all()
        assert session.scalar(select(func.count()).select_from(MeasurePart).where(MeasurePart.owner_id == run_id)) == 0
    assert not list(store.list_objects(run_prefix(run_id)))  # the parts' sums and recipes are gone
    return {row.corpus_id: row.metrics for row in rows}


def _same(measured: dict, expected: dict) -> None:
    """The same metrics: integers and words exactly, floats up to the order of their addition."""
    assert set(measured) == set(expected)
    for corpus_id, metrics in expected.items():
        got = {key: value for key, value in measured[corpus_id].items() if not key.startswith("vocab_curve")}
        assert set(got) == set(metrics), corpus_id
        for key, value in metrics.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
            else:
                assert json.dumps(got[key], sort_keys=True) == json.dumps(value, sort_keys=True), key


def _helping(sessionmaker, store, outcomes: list, started: list):
    # Helpers as other workers would run them: threads with their own sessions, sent by the run.
    def helper(owner):
        try:
            outcomes.append(measure_claimed_parts(sessionmaker, store, owner, WorkLimits()))
        except Exception as exc:
            outcomes.append(exc)

    def dispatch(owner, count):
        for _ in range(count):
            thread = threading.Thread(target=helper, args=(owner,))
            thread.start()
            started.append(thread)
    return dispatch


@pytest.mark.parametrize("subject", ["bpe", "wordpiece", "cl100k_base"])
def test_a_corpus_measured_in_parts_by_several_workers_has_the_metrics_of_one_pass(sessionmaker, store,
                                                                                  team_corpus_versions, subject):
    team, corpora, versions = team_corpus_versions
    version, reference = (versions[subject], None) if subject in versions else (None, subject)
    expected = _one_pass(store, corpora, version, reference)
    outcomes: list = []
    started: list[threading.Thread] = []
    helpers = MeasureHelpers(dispatch=_helping(sessionmaker, store, outcomes, started), count=2, part_bytes=PART_BYTES)
    run_id = _run(sessionmaker, store, team, corpora, version, reference, WorkLimits(), helpers)
    for thread in started:
        thread.join(60)
    assert len(started) == 2 * len(corpora)  # two helpers for each corpus (both have more than one part)
    assert all(isinstance(outcome, int) for outcome in outcomes), outcomes
    assert sum(outcomes) > 0  # the helpers measured parts, not only the coordinator
    _same(_run_metrics(sessionmaker, store, run_id), expected)


def test_a_part_left_by_a_dead_helper_is_measured_again(sessionmaker, store, team_corpus_versions):
    team, corpora, _ = team_corpus_versions
    expected = _one_pass(store, corpora[:1], None, "gpt2")
    # A helper claims part 0 and dies (its row stays 'running', untouched): the coordinator takes
    # it over once it has been silent for `silent_after`.
    claims = []

    def dispatch(owner, count):
        claims.append(claim_part(sessionmaker, MEASURING, owner.owner_id, owner.attempt, WorkLimits()))

    run_id = _run(sessionmaker, store, team, corpora[:1], None, "gpt2", WorkLimits(silent_after=1),
                  MeasureHelpers(dispatch=dispatch, count=1, part_bytes=PART_BYTES))
    assert len(claims) == 1 and claims[0] is not None and claims[0].part == 0
    _same(_run_metrics(sessionmaker, store, run_id), expected)


def test_a_corpus_of_one_part_is_measured_here_without_helpers(sessionmaker, store, team_corpus_versions):
    team, corpora, _ = team_corpus_versions
    dispatched = []
    helpers = MeasureHelpers(dispatch=lambda *args: dispatched.append(args), count=2, part_bytes=10**9)
    run_id = _run(sessionmaker, store, team, corpora, None, "gpt2", WorkLimits(), helpers)
    assert dispatched == []  # one part: no helpers, no rows
    with sessionmaker() as session:
        assert session.get_one(EvaluationRun, run_id).status == "succeeded"
    assert len(_run_metrics(sessionmaker, store, run_id)) == len(corpora)


def test_a_jobs_evaluation_of_a_corpus_measured_whole_is_spread_too(sessionmaker, store, team_corpus_versions):
    team, corpora, _ = team_corpus_versions
    outcomes: list = []
    started: list[threading.Thread] = []
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, "parts-job", {"vocab_size": 1500}, [str(corpora[0].id)],
                            [str(corpus.id) for corpus in corpora])
    helpers = MeasureHelpers(dispatch=_helping(sessionmaker, store, outcomes, started), count=2, part_bytes=PART_BYTES)
    assert run_training_job(sessionmaker, store, job.id, WorkLimits(), measuring=helpers) == "succeeded"
    for thread in started:
        thread.join(60)
    # Two helpers for each corpus the version is measured on, and for each reference not yet measured on it.
    assert len(started) >= 2 * len(corpora) and len(started) % 2 == 0
    assert all(isinstance(outcome, int) for outcome in outcomes) and sum(outcomes) > 0, outcomes
    with sessionmaker() as session:
        version = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id)).one()
        rows = session.scalars(select(Evaluation).where(Evaluation.version_id == version.id)).all()
        assert session.scalar(select(func.count()).select_from(JobMeasurePart)
                              .where(JobMeasurePart.owner_id == job.id)) == 0
        job_row = session.get_one(TrainingJob, job.id)
    assert not list(store.list_objects(f"{job_prefix(job_row)}/measures/"))
    _same({row.corpus_id: row.metrics for row in rows}, _one_pass(store, corpora, version, None))
    # The references the job measured (one after another on the same corpora, each plan replacing
    # the last; those the runs above measured are left as they are) have their one pass's metrics
    # too: no helper measured a part with an earlier encoder.
    for name in BASELINES:
        expected = _one_pass(store, corpora, None, name)
        with sessionmaker() as session:
            rows = session.scalars(select(Evaluation).where(Evaluation.reference == name,
                                                            Evaluation.team_id == team.id)).all()
        assert {row.corpus_id for row in rows} == set(expected), name
        for row in rows:
            _same({row.corpus_id: row.metrics}, {row.corpus_id: expected[row.corpus_id]})


@pytest.fixture
def small_sample(monkeypatch):
    """Evaluations sample 50 kB of each larger corpus (the setting read afresh, and again after the test)."""
    from tokenmill.settings import get_settings

    monkeypatch.setenv("TOKENMILL_EVALUATION_SAMPLE_BYTES", "50000")
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()


def test_a_run_asked_for_whole_corpora_measures_every_document_in_parts(sessionmaker, store, team_corpus_versions,
                                                                        small_sample):
    team, corpora, _ = team_corpus_versions
    corpus = corpora[0]  # about 400 kB: sampled at 50 kB unless the run asks for the whole
    outcomes: list = []
    started: list[threading.Thread] = []
    helpers = MeasureHelpers(dispatch=_helping(sessionmaker, store, outcomes, started), count=2, part_bytes=PART_BYTES)
    runs = {}
    for whole in (False, True):
        with transaction(sessionmaker) as session:
            run = submit_run(session, session.get_one(Team, team.id), None, None, "gpt2", [str(corpus.id)], whole=whole)
            assert run_out(session, run)["whole"] is whole
        assert run_evaluation(sessionmaker, store, run.id, WorkLimits(), helpers) == "succeeded"
        runs[whole] = _run_metrics(sessionmaker, store, run.id)[corpus.id]
    for thread in started:
        thread.join(60)
    assert runs[False]["sample"]["whole"] is False and runs[False]["documents"] < corpus.lines
    assert runs[True]["sample"]["whole"] is True and runs[True]["documents"] == corpus.lines
    assert len(started) == 2 and sum(outcomes) > 0  # only the whole corpus was spread
    with encoding_threads():
        expected = measure_corpus(reference_encoder("gpt2"), store, corpus, whole=True)
    _same({corpus.id: runs[True]}, {corpus.id: expected})
