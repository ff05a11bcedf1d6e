"""Distributed counting (`counting: distributed`) on PostgreSQL and S3: parts counted by several
workers give the files one worker gives, and a rustbpe job the files of its streamed run."""

import base64
import random
import subprocess
import sys
import threading
import time
import uuid
from datetime import datetime

import pytest
from sqlalchemy import func, select

from tests.stack import process_env
from tests.waiting import until
from tokenmill.corpora import ranges
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.jobs.pipeline import job_prefix, run_training_job
from tokenmill.jobs.submission import submit_job
from tokenmill.models import CountPart, TokenizerVersion, TrainingJob
from tokenmill.queued_work.lifecycle import claim
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.queued_work.parts import COUNTING, claim_part, part_heartbeat
from tokenmill.teams import create_team
from tokenmill.training.counting.distributed import Counting, Helpers, _plan, count_claimed_parts, help_counting
from tokenmill.training.counting.merge import cost
from tokenmill.training.regex_limit import SlowRegex
from tokenmill.training.spec import TrainingSpec

WORDS = ["the", "there", "then", "lower", "lowest", "día", "niño", "日本語", "добрый", "1999", "2026", "3.14",
         "def", "return", "x_1", "(a+b)", "aaaa", "!!", "Tokenmill", "counts", "merges", "pieces"]
SAME_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.tiktoken", "tokenizer.model", "tokenizer.vocab")


@pytest.fixture
def team_and_corpora(sessionmaker, store):
    with transaction(sessionmaker) as session:
        team, _ = create_team(session, f"counted-{uuid.uuid4().hex[:8]}")
    corpora = []
    for seed, language in ((1, "eng_Latn"), (2, "spa_Latn")):
        rng = random.Random(seed)
        text = "".join(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 25))) + "\n" for _ in range(3000))
        corpora.append(ingest_corpus(sessionmaker, store, team, CorpusFields(language, "news", language), [text.encode()],
                                     max_bytes=10**9, max_line_bytes=10**6))
    return team, corpora


def _job(sessionmaker, team, corpora, spec) -> uuid.UUID:
    with transaction(sessionmaker) as session:
        job, _ = submit_job(session, team, f"counted-{uuid.uuid4().hex[:6]}", spec, [str(c.id) for c in corpora], None)
    return job.id


def _files(sessionmaker, store, job_id) -> dict[str, bytes]:
    with sessionmaker() as session:
        version = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job_id)).one()
    return {entry["name"]: store.get_bytes(entry["key"]) for entry in version.files if entry["name"] in SAME_FILES}


def _trained(sessionmaker, store, team, corpora, spec, helpers=None) -> dict[str, bytes]:
    job_id = _job(sessionmaker, team, corpora, spec)
    assert run_training_job(sessionmaker, store, job_id, WorkLimits(), helpers) == "succeeded"
    with sessionmaker() as session:
        assert session.scalar(select(func.count()).select_from(CountPart).where(CountPart.owner_id == job_id)) == 0
        job = session.get_one(TrainingJob, job_id)
    assert not list(store.list_objects(f"{job_prefix(job)}/counts/"))  # spills are gone
    return _files(sessionmaker, store, job_id)


RUSTBPE = {"library": "rustbpe", "vocab_size": 700, "min_frequency": 0, "special_tokens": ["<|endoftext|>"]}


def test_a_rustbpe_job_counted_in_parts_makes_the_files_of_its_streamed_run(sessionmaker, store, team_and_corpora):
    team, corpora = team_and_corpora
    streamed = _trained(sessionmaker, store, team, corpora, RUSTBPE)
    counted = _trained(sessionmaker, store, team, corpora, {**RUSTBPE, "counting": "distributed"},
                       Helpers(part_bytes=4096))
    assert set(counted) == {"tokenizer.json", "vocab.json", "merges.txt", "tokenizer.tiktoken"}
    assert counted == streamed


def _helping(sessionmaker, store, workers: int, started: list, outcomes: list):
    # Helpers as other workers would run them: threads with their own sessions, sent by the job.
    # Each thread's outcome (parts counted, or the exception) is kept for the test to read.
    def helper(job_id, attempt, prefix):
        try:
            outcomes.append(count_claimed_parts(sessionmaker, store, job_id, attempt, prefix, WorkLimits()))
        except Exception as exc:
            outcomes.append(exc)

    def dispatch(job_id, attempt, prefix, count):
        for _ in range(min(count, workers)):
            thread = threading.Thread(target=helper, args=(job_id, attempt, prefix))
            thread.start()
            started.append(thread)
    return dispatch


@pytest.mark.parametrize("spec", [
    {**RUSTBPE, "min_frequency": 3, "counting": "distributed"},
    {"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 300, "counting": "distributed"},
    {"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 300, "counting": "distributed"},
], ids=["rustbpe-pruned", "sentencepiece-unigram", "sentencepiece-bpe"])
def test_any_number_of_workers_and_parts_give_the_files_of_one(sessionmaker, store, team_and_corpora, spec):
    team, corpora = team_and_corpora
    alone = _trained(sessionmaker, store, team, corpora, spec, Helpers(part_bytes=10**9))
    started: list[threading.Thread] = []
    outcomes: list = []
    helped = _trained(sessionmaker, store, team, corpora, spec,
                      Helpers(dispatch=_helping(sessionmaker, store, 3, started, outcomes), count=3, part_bytes=3000))
    for thread in started:
        thread.join(30)
    assert len(started) == 3
    assert all(isinstance(outcome, int) for outcome in outcomes) and len(outcomes) == 3, outcomes
    assert helped == alone


def test_a_part_left_by_a_dead_helper_is_counted_again(sessionmaker, store, team_and_corpora):
    team, corpora = team_and_corpora
    spec = {**RUSTBPE, "counting": "distributed"}
    expected = _trained(sessionmaker, store, team, corpora, spec, Helpers(part_bytes=10**9))
    # A helper claims part 0 and dies (its row stays 'running', untouched): the coordinator
    # takes it over once it has been silent for `silent_after`.
    # (The coordinator logs and carries on past a failing dispatch, so the claim is checked after the job.)
    claims = []

    def dispatch(job_id, attempt, prefix, count):
        claims.append(claim_part(sessionmaker, COUNTING, job_id, attempt, WorkLimits()))

    limits = WorkLimits(silent_after=1)
    job_id = _job(sessionmaker, team, corpora, spec)
    assert run_training_job(sessionmaker, store, job_id, limits, Helpers(dispatch=dispatch, count=1, part_bytes=8192)) \
        == "succeeded"
    assert len(claims) == 1 and claims[0] is not None and claims[0].part == 0
    assert _files(sessionmaker, store, job_id) == expected


def test_a_claimed_part_beats_while_its_counting_moves_and_falls_silent_when_it_stalls(sessionmaker, store,
                                                                                     team_and_corpora):
    team, corpora = team_and_corpora
    job_id = _job(sessionmaker, team, corpora, {**RUSTBPE, "counting": "distributed"})
    claim(sessionmaker, TrainingJob, job_id, WorkLimits())  # the coordinator has the job (attempt 1)
    with sessionmaker() as session:
        job = session.get_one(TrainingJob, job_id)
    counting = Counting(sessionmaker, job_id, job.attempts, job_prefix(job), WorkLimits(), Helpers(part_bytes=10**9))
    _plan(counting, ranges.plan(corpora, 10**9))
    row = claim_part(sessionmaker, COUNTING, job_id, job.attempts, WorkLimits())
    assert row is not None and (row.part, row.claims) == (0, 1)

    def beaten() -> datetime:
        with sessionmaker() as session:
            return session.scalar(select(CountPart.updated_at).where(
                CountPart.owner_id == job_id, CountPart.attempt == job.attempts, CountPart.part == 0))

    read = 0
    every = 0.1
    with part_heartbeat(sessionmaker, COUNTING, row, WorkLimits(heartbeat_seconds=every), lambda: read):
        claimed = beaten()
        read += 1
        until(beaten, lambda at: at > claimed, 10, every=every)  # documents were read: it beats
        stalled = beaten()
        time.sleep(5 * every)  # nothing read for five beats
        assert beaten() == stalled
        read += 1
        until(beaten, lambda at: at > stalled, 10, every=every)  # moving again


HELP_ONCE = """
import sys, uuid
from tokenmill.training.counting.distributed import help_counting
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.queued_work.lifecycle import claim
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.settings import get_settings
from tokenmill.store import open_store
settings = get_settings()
factory = make_sessionmaker(make_engine(settings.database_url))
store = open_store(settings.storage_url, settings.s3_endpoint_url)
print(help_counting(factory, store, uuid.UUID(sys.argv[1]), int(sys.argv[2]), sys.argv[3],
                    WorkLimits(max_memory=int(sys.argv[4]))))
"""


def test_a_helper_past_the_memory_cap_fails_the_job_and_exits(settings, sessionmaker, store, team_and_corpora):


    team, corpora = team_and_corpora
    job_id = _job(sessionmaker, team, corpora, {**RUSTBPE, "counting": "distributed"})
    claim(sessionmaker, TrainingJob, job_id, WorkLimits())  # the coordinator has the job (attempt 1)
    with sessionmaker() as session:
        job = session.get_one(TrainingJob, job_id)
    counting = Counting(sessionmaker, job_id, job.attempts, job_prefix(job), WorkLimits(), Helpers(part_bytes=4096))
    _plan(counting, ranges.plan(corpora, 4096))
    # 1 MiB: less than the interpreter itself, so the guard's first check stops the helper.
    done = subprocess.run([sys.executable, "-c", HELP_ONCE, str(job_id), str(job.attempts), job_prefix(job),
                           str(2**20)], env=process_env(settings, 0), capture_output=True, text=True, timeout=120)
    assert done.returncode == 70, done.stdout + done.stderr[-2000:]
    with sessionmaker() as session:
        row = session.get_one(TrainingJob, job_id)
    assert row.status == "failed" and "of memory" in row.error, row.error


@pytest.mark.parametrize("who", ["coordinator", "helper"])
def test_a_custom_regex_too_slow_on_a_document_of_a_part_fails_the_job_naming_it(sessionmaker, store, team_and_corpora,
                                                                                  who):
    from tests.unit.test_regex_limit import LIMIT, SLOW_DOCUMENT, SLOW_REGEX, WITHIN

    team, corpora = team_and_corpora
    lines = [" ".join(WORDS)] * 40 + [SLOW_DOCUMENT] + [" ".join(WORDS)] * 40
    slow = ingest_corpus(sessionmaker, store, team, CorpusFields("slow-one", "news", "eng_Latn"),
                         ["\n".join(lines).encode()], max_bytes=10**9, max_line_bytes=10**6)
    spec = {"library": "tokenmill", "vocab_size": 300, "counting": "distributed", "pre_tokenizer": "none",
            "pre_tokenizer_regex": SLOW_REGEX}
    job_id = _job(sessionmaker, team, [corpora[0], slow], spec)
    claim(sessionmaker, TrainingJob, job_id, WorkLimits())  # the coordinator has the job (attempt 1)
    with sessionmaker() as session:
        job = session.get_one(TrainingJob, job_id)
    counting = Counting(sessionmaker, job_id, job.attempts, job_prefix(job), WorkLimits(), Helpers(part_bytes=10**9))
    _plan(counting, ranges.plan([corpora[0], slow], 10**9))
    started = time.monotonic()
    where = "document 41 counted from byte 0 of corpus 'slow-one'"
    if who == "coordinator":
        with pytest.raises(SlowRegex, match=rf"took over 1s \(\+1s per 1,000,000 characters\) in Python's regex engine on {where}:"):
            count_claimed_parts(sessionmaker, store, job_id, job.attempts, job_prefix(job), WorkLimits(),
                                TrainingSpec.model_validate(job.spec), regex_seconds=LIMIT)
    else:
        assert help_counting(sessionmaker, store, job_id, job.attempts, job_prefix(job), WorkLimits(),
                             regex_seconds=LIMIT) == 0
        with sessionmaker() as session:
            row = session.get_one(TrainingJob, job_id)
        assert row.status == "failed" and row.error.startswith(
            f"spec.pre_tokenizer_regex: the custom regex {SLOW_REGEX!r} took over 1s (+1s per 1,000,000 characters) in Python's regex engine on {where}:")
    assert time.monotonic() - started < WITHIN


def _latest_lineage(sessionmaker, team) -> dict:
    with sessionmaker() as session:
        return session.scalars(select(TokenizerVersion.lineage).where(TokenizerVersion.name.like("counted-%"),
                                                                      TokenizerVersion.team_id == team.id)
                               .order_by(TokenizerVersion.created_at.desc()).limit(1)).one()


def _training_data(sessionmaker, store, team, corpora, spec, helpers=None) -> tuple[dict[str, bytes], dict]:
    files = _trained(sessionmaker, store, team, corpora, spec, helpers)
    return files, _latest_lineage(sessionmaker, team)["training_data"]


def test_deduplicated_counting_in_parts_makes_the_files_of_its_streamed_run(sessionmaker, store, team_and_corpora):
    # The corpora's lines are 1 to 25 words drawn from 22: the short ones repeat, within a part,
    # across parts and across the two corpora.
    team, corpora = team_and_corpora
    spec = {**RUSTBPE, "deduplicate": True}
    streamed, streamed_data = _training_data(sessionmaker, store, team, corpora, spec)
    started: list[threading.Thread] = []
    outcomes: list = []
    helpers = Helpers(dispatch=_helping(sessionmaker, store, 2, started, outcomes), count=2, part_bytes=3000)
    counted, counted_data = _training_data(sessionmaker, store, team, corpora, {**spec, "counting": "distributed"},
                                           helpers)
    for thread in started:
        thread.join(30)
    assert all(isinstance(outcome, int) for outcome in outcomes), outcomes
    assert counted == streamed
    assert counted_data["duplicates_dropped"] == streamed_data["duplicates_dropped"] > 50
    assert _trained(sessionmaker, store, team, corpora, RUSTBPE) != streamed  # the duplicates did count


def test_merged_counts_past_the_memory_budget_keep_the_frequent_pieces_and_say_so(sessionmaker, store, team_and_corpora,
                                                                               monkeypatch):
    from tokenmill.training.counting import distributed

    team, corpora = team_and_corpora
    spec = {**RUSTBPE, "counting": "distributed"}
    full, _ = _training_data_of(sessionmaker, store, team, corpora, spec)
    monkeypatch.setattr(distributed, "learner_budget", lambda max_memory: cost(12, 48))  # a dozen of its pieces
    squeezed, lineage = _training_data_of(sessionmaker, store, team, corpora, spec)
    pruned = lineage["pruned"]
    assert pruned["raised"] and pruned["threshold"] > 1 and pruned["pieces_dropped"] > 0
    assert squeezed != full
    # What it learned from is what min_frequency at that threshold keeps, budget or not.
    monkeypatch.setattr(distributed, "learner_budget", lambda max_memory: None)
    at_threshold, _ = _training_data_of(sessionmaker, store, team, corpora, {**spec, "min_frequency": pruned["threshold"]})
    assert at_threshold == squeezed


def _training_data_of(sessionmaker, store, team, corpora, spec) -> tuple[dict[str, bytes], dict]:
    job_id = _job(sessionmaker, team, corpora, spec)
    assert run_training_job(sessionmaker, store, job_id, WorkLimits()) == "succeeded"
    with sessionmaker() as session:
        version = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job_id)).one()
    from service.schemas import VersionOut

    notes = VersionOut.model_validate(version).notes
    if version.lineage["pruned"]["raised"]:
        assert any("to fit the job's memory" in note for note in notes), notes
    return _files(sessionmaker, store, job_id), version.lineage


SUPERWORD = {"library": "tokenmill", "vocab_size": 700, "superword": {"transition_vocab_size": 500}}


def test_superword_stages_counted_in_parts_by_several_workers_make_the_files_of_its_streamed_run(
        sessionmaker, store, team_and_corpora):
    # Each part is counted once into both stages' spills (the regex's pieces, the spans across
    # whitespace); stage 1 learns from the merged pieces, stage 2 from the merged spans.
    team, corpora = team_and_corpora
    streamed = _trained(sessionmaker, store, team, corpora, SUPERWORD)
    streamed_lineage = _latest_lineage(sessionmaker, team)
    started: list[threading.Thread] = []
    outcomes: list = []
    helpers = Helpers(dispatch=_helping(sessionmaker, store, 2, started, outcomes), count=2, part_bytes=3000)
    counted = _trained(sessionmaker, store, team, corpora, {**SUPERWORD, "counting": "distributed"}, helpers)
    for thread in started:
        thread.join(30)
    assert len(started) == 2 and all(isinstance(outcome, int) for outcome in outcomes), outcomes
    superword = _latest_lineage(sessionmaker, team)["superword"]
    assert superword["merges_added"] > 0 and superword["spans"] == streamed_lineage["superword"]["spans"]
    assert superword["stage1_pruned"]["pieces_dropped"] == 0
    ranks = [base64.b64decode(line.split()[0]) for line in counted["tokenizer.tiktoken"].splitlines()]
    assert any(b" " in token.strip(b" ") for token in ranks[500:]), "no merge crossed a space"
    assert counted == streamed
