"""Evaluation that scales with the corpora: a seeded sample against the whole corpus, and the whole
corpus measured by one worker process against two (tokenmill.evaluation.parts).

Builds a corpus of --mb from the shared corpora (benchmarks.train_speed.corpus_file: every source
in the same share, repeated past their ~106 MB), registers it on a fresh PostgreSQL database with
a local folder store, and measures one reference tokenizer (--reference, cl100k_base) on it, each
measuring process on one core (TOKENMILL_EVALUATION_THREADS=1):

- `sampled`: the evaluation's seeded sample of 64 MiB worth of documents (the default
  TOKENMILL_EVALUATION_SAMPLE_BYTES), with its 95% intervals, drawn while reading the whole corpus;
- `whole, 1 process`: an evaluation run measuring every byte, its worker alone (parts of --part-mb);
- `whole, 2 processes`: the same run with one helper process measuring parts beside it.

It checks that the sample's intervals cover the whole corpus's values and that both whole runs
give the same metrics, and prints the Markdown table BENCHMARKS.md holds.

    .venv/bin/python -m benchmarks.whole_evaluation --mb 2000
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

KEY = "corpora/bench/whole"
SAMPLE_BYTES = 64 * 2**20  # the default TOKENMILL_EVALUATION_SAMPLE_BYTES
# Before any settings are read: one core per process, and evaluation runs that measure every corpus whole.
os.environ.update({"TOKENMILL_EVALUATION_THREADS": "1", "TOKENMILL_EVALUATION_SAMPLE_BYTES": "0"})

HELPER = """
import sys, uuid
from tokenmill.db import make_engine, make_sessionmaker
from tokenmill.evaluation.parts import help_measuring, run_owner
from tokenmill.queued_work.limits import WorkLimits
from tokenmill.store import open_store
factory = make_sessionmaker(make_engine(sys.argv[1]))
print(help_measuring(factory, open_store(sys.argv[2]), run_owner(uuid.UUID(sys.argv[3]), int(sys.argv[4])), WorkLimits()))
"""


def _registered(factory, root: Path, mb: float):
    """The corpus file, built under the store's folder, and its row."""
    from benchmarks.train_speed import corpus_file
    from tokenmill.db import transaction
    from tokenmill.models import Corpus
    from tokenmill.teams import create_team

    path = root / KEY
    path.parent.mkdir(parents=True)
    corpus_file(path, int(mb * 1e6))
    digest, lines = hashlib.sha256(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 24):
            digest.update(chunk)
            lines += chunk.count(b"\n")
    with transaction(factory) as session:
        team, _ = create_team(session, f"bench-{uuid.uuid4().hex[:8]}")
        corpus = Corpus(team_id=team.id, name="whole", domain="mixed", language="mul", format="text", storage_key=KEY,
                        sha256=digest.hexdigest(), bytes=path.stat().st_size, lines=lines, words=0, characters=0)
        session.add(corpus)
    return team, corpus


def sampled(store, corpus, reference: str) -> tuple[float, dict]:
    """The evaluation's seeded sample of SAMPLE_BYTES worth of documents, measured as an evaluation
    measures it (reading the whole corpus to draw it)."""
    from tokenmill.evaluation.encoders import reference_encoder
    from tokenmill.evaluation.measuring import evaluation_documents, measure, sample_share

    started = time.monotonic()
    metrics = measure(reference_encoder(reference), evaluation_documents(store, corpus, sample_share(corpus, SAMPLE_BYTES)))
    return time.monotonic() - started, metrics


def whole(factory, store, database_url: str, store_url: str, team, corpus, reference: str, part_bytes: int,
          helpers: int) -> tuple[float, dict]:
    """An evaluation run of the reference on the corpus, measured whole by its worker and `helpers` processes."""
    from sqlalchemy import select

    from tokenmill.db import transaction
    from tokenmill.evaluation.parts import MeasureHelpers
    from tokenmill.evaluation.pipeline import run_evaluation
    from tokenmill.evaluation.submission import submit_run
    from tokenmill.models import Evaluation, Team

    started_helpers: list[subprocess.Popen] = []

    def dispatch(owner, count):
        started_helpers.extend(subprocess.Popen([sys.executable, "-c", HELPER, database_url, store_url,
                                                 str(owner.owner_id), str(owner.attempt)]) for _ in range(count))

    with transaction(factory) as session:
        run = submit_run(session, session.get_one(Team, team.id), None, None, reference, [str(corpus.id)])
    started = time.monotonic()
    assert run_evaluation(factory, store, run.id, helpers=MeasureHelpers(dispatch, helpers, part_bytes)) == "succeeded"
    seconds = time.monotonic() - started
    for helper in started_helpers:
        helper.wait(60)
    with factory() as session:
        metrics = session.scalars(select(Evaluation.metrics).where(Evaluation.run_id == run.id)).one()
    return seconds, metrics


def _row(name: str, seconds: float, corpus_bytes: int, metrics: dict) -> str:
    measured = metrics["bytes"]
    return (f"| {name} | {measured / 1e6:,.0f} MB ({metrics['documents']:,} documents) | {seconds:.1f} s "
            f"| {corpus_bytes / 1e6 / seconds:.1f} MB/s | {metrics['fertility']:.4f} ± {metrics['fertility_ci95']:.4f} "
            f"| {metrics['chars_per_token']:.4f} ± {metrics['chars_per_token_ci95']:.4f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=2000)
    parser.add_argument("--reference", default="cl100k_base")
    parser.add_argument("--part-mb", type=float, default=128)
    args = parser.parse_args()
    from tests.services import postgres_database
    from tokenmill.db import make_engine, make_sessionmaker
    from tokenmill.store import open_store

    with postgres_database() as database_url, tempfile.TemporaryDirectory(prefix="whole-evaluation-") as folder:
        factory = make_sessionmaker(make_engine(database_url))
        store_url = f"file://{folder}"
        store = open_store(store_url)
        team, corpus = _registered(factory, Path(folder), args.mb)
        part_bytes = int(args.part_mb * 2**20)
        sample = sampled(store, corpus, args.reference)
        alone = whole(factory, store, database_url, store_url, team, corpus, args.reference, part_bytes, 0)
        helped = whole(factory, store, database_url, store_url, team, corpus, args.reference, part_bytes, 1)
    print(f"{args.reference} on {corpus.bytes / 1e6:,.0f} MB ({corpus.lines:,} lines), parts of {args.part_mb:g} MiB, "
          f"one core per process\n")
    print("| measured | text measured | time | corpus read per second | fertility ± 95% | chars/token ± 95% |")
    print("|---|---|---|---|---|---|")
    for name, (seconds, metrics) in (("sampled (64 MiB)", sample), ("whole, 1 process", alone),
                                     ("whole, 2 processes", helped)):
        print(_row(name, seconds, corpus.bytes, metrics))
    full = alone[1]
    for metric in ("fertility", "chars_per_token"):
        error = abs(sample[1][metric] - full[metric])
        print(f"\n{metric}: sample {sample[1][metric]:.5f}, whole {full[metric]:.5f}, error {error:.5f} "
              f"against the interval's ±{sample[1][metric + '_ci95']:.5f}: "
              f"{'covered' if error <= sample[1][metric + '_ci95'] else 'NOT COVERED'}")
    same = all(alone[1][key] == helped[1][key] for key in ("tokens", "words", "characters", "bytes", "documents"))
    print(f"whole runs agree on tokens, words, characters, bytes and documents: {same}; "
          f"2 processes / 1: {alone[0] / helped[0]:.2f}× as fast")


if __name__ == "__main__":
    main()
