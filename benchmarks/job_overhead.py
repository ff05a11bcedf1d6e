"""What a training job costs beyond its engine, on the same file: wall time and peak RSS (issue 12, item 2).

Builds one corpus of --mb MB the way `benchmarks.train_speed` does, then, each step in a fresh
process of its own:

1. ingest: a SQLite database migrated with `tokenmill.cli.migrate(url)`, a local folder store
   (`open_store("file://...")`), a team, and the corpus ingested (`ingest_corpus`), so that the
   ingest's memory is nobody else's;
2. per library (`tokenizers`, `rustbpe`, `tokenmill`): the engine alone, as `benchmarks.train_speed`
   runs it (its child process: `tokenizers files` = bare `tokenizers`, `tokenizers iterator` =
   today's engine on the file's lines, `rustbpe` = `learn_ranks` + `to_tokenizer` in one process,
   `tokenmill` = `train_tokenmill` with its counting children);
3. per library: the job, in a fresh process: `submit_job(..., eval_corpora=[])` and
   `tokenmill.jobs.pipeline.run_training_job(factory, store, job_id, WorkLimits.of(settings))` in
   process (no Celery; the worker's default limits, so its heartbeat and memory guard run),
   timed from submit to the version registered. Peak RSS is the process's VmHWM; with
   `"library": "rustbpe"` the job learns in a child process of its own, whose VmHWM (and the
   highest sum of both processes' RSS at one moment) is sampled every 0.25 s from the child's
   start (VmHWM is a high-water mark: any reading after the peak holds it); a job without a
   child runs no sampler thread, so the measurement adds no thread to the job's own.

The job's stages are timed by wrapping, in the job's process only, the functions the pipeline
calls (claim, lineage, train_version_files, the engine, the counting pass, export, manifest, hashing,
store writes, the evaluation step with no corpus, registration), and
the passes over the corpus are counted at the store. After the job, the same process times
one pass over the corpus each way (file lines as the engine reads them; the store's documents;
those through `tracked`'s progress; for rustbpe also framed into a pipe and read back), so the
job's reading costs are known apart from the engine. Last, tokenizers' counting pass alone (a
300-token vocabulary) is timed fed five ways (PROBES: the engine's or the job's imports, file
lines or the job's texts, with or without the job's threads, gc.freeze()), each in a fresh process.

    .venv/bin/python -m benchmarks.job_overhead --mb 100
    .venv/bin/python -m benchmarks.job_overhead --mb 100 --without-guard   # each job again with max_memory=None
    .venv/bin/python -m benchmarks.job_overhead --mb 30 --probes-only --probe-repeats 3

--runs N repeats engines and jobs interleaved; --no-bare skips bare tokenizers; --no-probe the
probes; --markdown/--json write the tables/every figure to files.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from benchmarks import train_speed
from benchmarks.train_speed import MB, SPECIAL, corpus_file, high_water_kib

ENGINES = {"tokenizers": ("tokenizers files", "tokenizers iterator"), "rustbpe": ("rustbpe",),
           "tokenmill": ("tokenmill",)}
ENGINE_OF = {"tokenizers": "tokenizers iterator", "rustbpe": "rustbpe", "tokenmill": "tokenmill"}  # what the job runs
BARE = "tokenizers files"
MIB = 1024


def status_kib(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM of a process, KiB (empty once it has gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return {}
    return {line.split(":")[0]: int(line.split()[1]) for line in text.splitlines()
            if line.startswith(("VmRSS:", "VmHWM:"))}


def spec_of(library: str, vocab: int) -> dict:
    """The spec train_speed's engines train with (gpt2 regex, <|endoftext|>), for this library."""
    return {"library": library, "vocab_size": vocab, "pre_tokenizer": "gpt2", "special_tokens": [SPECIAL]}


def urls(work: Path) -> tuple[str, str]:
    return f"sqlite:///{work / 'tokenmill.db'}", f"file://{work / 'store'}"


# --- step 1: ingest, in a process of its own -------------------------------------------------

def ingest_child(work: Path, corpus: Path) -> dict:
    from tokenmill.cli import migrate
    from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
    from tokenmill.db import make_engine, make_sessionmaker, transaction
    from tokenmill.store import open_store, read_into
    from tokenmill.teams import create_team

    database_url, storage_url = urls(work)
    migrate(database_url)
    factory = make_sessionmaker(make_engine(database_url))
    store = open_store(storage_url)
    with transaction(factory) as session:
        team, _ = create_team(session, "bench")
    started = time.perf_counter()
    with corpus.open("rb") as handle:
        row = ingest_corpus(factory, store, team, CorpusFields("bench", "mixed", "mul"), read_into(handle),
                            max_bytes=50 * 1024**3, max_line_bytes=8 * 1024**2)
    return {"team_id": str(team.id), "corpus_id": str(row.id), "ingest": time.perf_counter() - started,
            "bytes": row.bytes, "lines": row.lines, "peak_kib": high_water_kib()}


# --- step 3: the job, in a process of its own ------------------------------------------------

class Sampler(threading.Thread):
    """Every 0.25 s once a child is watched: each child's VmHWM, and the highest sum of this
    process's RSS and its children's at one moment. Children are watched from their Popen
    (psutil's children() reads every process of the machine: 8 ms a call here). The thread
    starts with the first child, so a job without one has no extra thread."""

    def __init__(self, every: float = 0.25) -> None:
        super().__init__(daemon=True, name="rss-sampler")
        self.every = every
        self.watched: dict[int, str] = {}
        self.child_hwm: dict[int, int] = defaultdict(int)
        self.max_sum = 0
        self._halt = threading.Event()

    def watch(self, pid: int, what: str) -> None:
        self.watched[pid] = what
        if self.ident is None and not self._halt.is_set():
            self.start()

    def sample(self) -> None:
        total = status_kib().get("VmRSS", 0)
        for pid in list(self.watched):
            figures = status_kib(pid)
            if figures:
                self.child_hwm[pid] = max(self.child_hwm[pid], figures.get("VmHWM", 0))
                total += figures.get("VmRSS", 0)
        self.max_sum = max(self.max_sum, total)

    def run(self) -> None:
        while not self._halt.wait(self.every):
            self.sample()

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join()

    def children_peak(self) -> int:
        return max(self.child_hwm.values(), default=0)


class Timeline:
    """Spans (label, start, end, memory at the end) and running totals, relative to `origin`."""

    def __init__(self, sampler: Sampler) -> None:
        self.origin = time.perf_counter()
        self.sampler = sampler
        self.spans: list[dict] = []
        self.totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # label -> [calls, seconds]
        self.lock = threading.Lock()

    def span(self, label: str, start: float, end: float) -> None:
        memory = status_kib()
        self.spans.append({"label": label, "start": start - self.origin, "end": end - self.origin,
                           "hwm_kib": memory.get("VmHWM", 0), "rss_kib": memory.get("VmRSS", 0),
                           "child_hwm_kib": self.sampler.children_peak()})

    def add(self, label: str, seconds: float) -> None:
        with self.lock:
            self.totals[label][0] += 1
            self.totals[label][1] += seconds

    def wrap(self, owner, name: str, label: str, total: bool = False) -> None:
        """Replace owner.name by a timed call: a span each call, or (total) one running sum."""
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                if total:
                    self.add(label, time.perf_counter() - started)
                else:
                    self.span(label, started, time.perf_counter())

        setattr(owner, name, timed)


def instrument(timeline: Timeline, sampler: Sampler, store, corpus_key: str) -> dict:
    """Wrap what the pipeline calls, in this process only; returns the pass counters."""
    from tokenmill.jobs import pipeline
    from tokenmill.queued_work import heartbeat, progress
    from tokenmill.training import export, version_files, with_rustbpe, with_tokenizers

    for name, label in (("claim", "claim"), ("_corpora", "corpus rows"), ("lineage", "lineage (package versions)"),
                        ("train_version_files", "train_version_files"), ("_evaluate", "evaluate (no corpora)"),
                        ("_register", "register")):
        timeline.wrap(pipeline, name, label)
    for name, label in (("train_tokenizer", "engine (train_tokenizer)"), ("version_contents", "export (version_contents)"),
                        ("artifact_files", "export: artifact_files"), ("manifest", "export: manifest")):
        timeline.wrap(version_files, name, label)
    timeline.wrap(version_files, "sha256", "hashing (TrainedFiles.hashes)", total=True)
    timeline.wrap(export, "sha256", "hashing (manifest)", total=True)
    timeline.wrap(export, "bpe_files", "export: vocab.json + merges.txt")
    timeline.wrap(export, "tiktoken_file", "export: tokenizer.tiktoken")
    timeline.wrap(with_tokenizers, "train", "engine: tokenizers train_from_iterator")
    timeline.wrap(with_rustbpe, "learn_ranks_apart", "engine: rustbpe child (spawn, feed, wait)")
    timeline.wrap(with_rustbpe, "to_tokenizer", "engine: merges to a Tokenizer")
    timeline.wrap(with_tokenizers, "coverage_alphabet", "alphabet pass")
    timeline.wrap(version_files, "reservoir_sample", "sampling pass")
    timeline.wrap(heartbeat, "over_memory", "memory guard (RSS of the process and its children, PSS past the limit)",
                  total=True)
    timeline.wrap(heartbeat.Heartbeat, "_beat", "heartbeat writes", total=True)
    timeline.wrap(store, "put_bytes", "store writes (put_bytes)", total=True)

    counters = {"passes": 0, "training_texts": 0}
    original_tracked, original_texts, original_chunks = version_files.tracked, version_files.training_texts, store.iter_chunks

    def tracked(texts, total, report, stage, start, end):
        def marked():
            started = time.perf_counter()
            yield from original_tracked(texts, total, report, stage, start, end)
            timeline.span(f"pass over the corpus ({stage})", started, time.perf_counter())
        return marked()

    def training_texts(*args, **kwargs):
        counters["training_texts"] += 1
        return original_texts(*args, **kwargs)

    def iter_chunks(key, *args, **kwargs):
        if key == corpus_key:
            counters["passes"] += 1
        return original_chunks(key, *args, **kwargs)

    version_files.tracked, version_files.training_texts, store.iter_chunks = tracked, training_texts, iter_chunks

    original_transaction = progress.transaction

    @contextmanager
    def reporter_transaction(factory):
        started = time.perf_counter()
        with original_transaction(factory) as session:
            yield session
        timeline.add("progress writes (Reporter)", time.perf_counter() - started)

    progress.transaction = reporter_transaction

    class WatchedPopen(subprocess.Popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            sampler.watch(self.pid, " ".join(map(str, self.args))[-60:])

    subprocess.Popen = WatchedPopen
    return counters


class Throttled:
    """A Reporter that writes nothing: its once-a-second check alone, for the pass timings."""

    def __init__(self) -> None:
        self._last = 0.0

    def __call__(self, stage: str, progress: float, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 1.0:
            return
        self._last = now


def timed_pass(texts) -> float:
    started = time.perf_counter()
    for _ in texts:
        pass
    return time.perf_counter() - started


def reading_passes(library: str, corpus: Path, store, row, work: Path) -> dict[str, float]:
    """One pass over the corpus each way, alone (nothing trains meanwhile)."""
    from tokenmill.corpora.reading import corpus_documents, iter_lines
    from tokenmill.queued_work.progress import tracked
    from tokenmill.training.text_frames import frames, write_frame
    from tokenmill.training.version_files import training_texts

    passes = {
        "file lines (as the engine alone reads them)": timed_pass(train_speed.lines(corpus)),
        "store chunks split into lines (iter_lines: UTF-8 decode, split, \\r check)":
            timed_pass(iter_lines(store.iter_chunks(row.storage_key))),
        "store documents (corpus_documents: + blank-line check, line numbers)": timed_pass(corpus_documents(store, row)),
        "store documents + tracked progress (the job's pass)":
            timed_pass(tracked(training_texts(store, [row]), row.characters, Throttled(), "training", 0.0, 0.5)),
    }
    if library == "rustbpe":
        framed = work / "frames.bin"
        started = time.perf_counter()
        with framed.open("wb") as out:
            for text in tracked(training_texts(store, [row]), row.characters, Throttled(), "training", 0.0, 0.5):
                write_frame(out, text.encode("utf-8", "surrogatepass"))
        passes["the job's pass, framed into a file (the parent's side of the pipe)"] = time.perf_counter() - started
        with framed.open("rb") as handle:
            passes["frames read back and decoded (the rustbpe child's side)"] = timed_pass(
                frame.decode("utf-8", "surrogatepass") for frame in frames(handle))
        framed.unlink()
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from tokenmill.training.with_rustbpe import serve"], check=True)
        passes["a fresh interpreter importing tokenmill.training.with_rustbpe (the child's start)"] = \
            time.perf_counter() - started
    return passes


def job_child(work: Path, corpus: Path, library: str, vocab: int, team_id: str, corpus_id: str, guard: bool) -> dict:
    imported = time.perf_counter()
    import dataclasses
    import uuid

    from sqlalchemy import select

    from tokenmill.allocator import map_large_blocks
    from tokenmill.db import make_engine, make_sessionmaker, transaction
    from tokenmill.jobs.pipeline import run_training_job
    from tokenmill.jobs.submission import submit_job
    from tokenmill.models import Corpus, Team, TokenizerVersion, TrainingJob
    from tokenmill.queued_work.limits import WorkLimits
    from tokenmill.settings import Settings
    from tokenmill.store import open_store

    imports = time.perf_counter() - imported
    map_large_blocks()  # as a worker sets it for its children (workers/tasks.py)
    baseline = status_kib()
    database_url, storage_url = urls(work)
    settings = Settings(home=work, database_url=database_url, storage_url=storage_url)
    factory = make_sessionmaker(make_engine(database_url))
    store = open_store(storage_url)
    with factory() as session:
        row = session.get_one(Corpus, uuid.UUID(corpus_id))
    sampler = Sampler()
    timeline = Timeline(sampler)
    counters = instrument(timeline, sampler, store, row.storage_key)

    submitted = time.perf_counter()
    with transaction(factory) as session:
        team = session.get_one(Team, uuid.UUID(team_id))
        job, _ = submit_job(session, team, f"bench-{library}", spec_of(library, vocab), [corpus_id], [])
    timeline.span("submit", submitted, time.perf_counter())
    limits = WorkLimits.of(settings) if guard else dataclasses.replace(WorkLimits.of(settings), max_memory=None)
    status = run_training_job(factory, store, job.id, limits)
    done = time.perf_counter()
    sampler.sample()
    sampler.stop()
    memory = status_kib()
    with factory() as session:
        final = session.get_one(TrainingJob, job.id)
        version = session.scalars(select(TokenizerVersion).where(TokenizerVersion.job_id == job.id)).first()
    if status != "succeeded" or version is None:
        raise SystemExit(f"the {library} job ended {status}: {final.error}")
    tokenizer_key = next(f["key"] for f in version.files if f["name"] == "tokenizer.json")
    result = {
        "library": library, "guard": guard, "status": status, "stage": final.stage, "imports": imports,
        "submit_to_registered": done - submitted, "origin_to_submit": submitted - timeline.origin,
        "baseline_kib": baseline.get("VmHWM", 0), "peak_kib": memory["VmHWM"],
        "child_peak_kib": sampler.children_peak(), "max_sum_kib": sampler.max_sum,
        "children": {sampler.watched[pid]: kib for pid, kib in sampler.child_hwm.items()},
        "version_train_seconds": version.train_seconds, "version_peak_memory_bytes": version.peak_memory_bytes,
        "files": {f["name"]: f["bytes"] for f in version.files},
        "tokenizer_json": str(Path(storage_url.removeprefix("file://")) / tokenizer_key),
        "passes_over_corpus": counters["passes"], "training_texts_calls": counters["training_texts"],
        "spans": timeline.spans, "totals": {k: {"calls": v[0], "seconds": v[1]} for k, v in timeline.totals.items()},
    }
    result["alone"] = reading_passes(library, corpus, store, row, work)
    result["after_done"] = time.perf_counter() - done  # the parent takes it off the process's wall
    return result


# --- the counting pass alone: what slows the job's (tokenizers) ------------------------------

PROBE_VOCAB = 300  # 43 merges: train_from_iterator is then its counting pass, nearly all of it
PROBES = {  # name: (imports, texts, threads, gc.freeze() after the imports)
    "a. engine's imports, file lines, no threads (the engine alone)": ("engine", "file", False, False),
    "b. the job's imports (tokenmill.jobs.pipeline), file lines, no threads": ("job", "file", False, False),
    "c. the job's imports, the job's texts (store documents + tracked), no threads": ("job", "store", False, False),
    "d. as c, with the job's threads (PeakMemory every 0.1 s, heartbeat + memory guard every 1 s)":
        ("job", "store", True, False),
    "e. as b, gc.freeze() after the imports": ("job", "file", False, True),
}


def probe_child(work: Path, corpus: Path, corpus_id: str, probe: str) -> dict:
    """tokenizers' counting pass (a 300-token vocabulary) fed as the probe says, in this fresh process."""
    imports, feed, threads, freeze = PROBES[probe]
    import gc
    import uuid
    from contextlib import ExitStack

    from tokenmill.training import with_tokenizers
    from tokenmill.training.spec import resolve_spec

    if imports == "job":
        import tokenmill.jobs.pipeline  # noqa: F401  (the job process's modules: numba, sqlalchemy, evaluation ...)
    spec = resolve_spec(spec_of("tokenizers", PROBE_VOCAB))
    if freeze:
        gc.freeze()
    collections = sum(g["collections"] for g in gc.get_stats())
    with ExitStack() as stack:
        if feed == "file":
            texts = train_speed.lines(corpus)
        else:
            from tokenmill.db import make_engine, make_sessionmaker
            from tokenmill.models import Corpus
            from tokenmill.queued_work.progress import tracked
            from tokenmill.store import open_store
            from tokenmill.training.version_files import training_texts

            database_url, storage_url = urls(work)
            factory = make_sessionmaker(make_engine(database_url))
            store = open_store(storage_url)
            with factory() as session:
                row = session.get_one(Corpus, uuid.UUID(corpus_id))
            texts = tracked(training_texts(store, [row]), row.characters, Throttled(), "training", 0.0, 0.5)
            if threads:
                from tokenmill.queued_work.heartbeat import Heartbeat
                from tokenmill.queued_work.limits import WorkLimits
                from tokenmill.queued_work.progress import PeakMemory
                from tokenmill.settings import Settings

                limits = WorkLimits.of(Settings(home=work, database_url=database_url, storage_url=storage_url))
                stack.enter_context(Heartbeat(factory, lambda session: True, limits, give_up=lambda message: None))
                stack.enter_context(PeakMemory())
        parts: dict = {}
        started = time.perf_counter()
        with_tokenizers.train(spec, train_speed.streamed(texts, parts, started))
        seconds = time.perf_counter() - started
    return {"probe": probe, "seconds": seconds, "stream": parts["stream"], "peak_kib": high_water_kib(),
            "gc_collections": sum(g["collections"] for g in gc.get_stats()) - collections,
            "gc_tracked": len(gc.get_objects())}


# --- the parent: run the steps, print the tables ---------------------------------------------

def run_child(argv: list[str]) -> dict:
    """A fresh `python -m benchmarks.job_overhead --child ...`: its wall time and what it printed."""
    started = time.perf_counter()
    process = subprocess.run([sys.executable, "-m", "benchmarks.job_overhead", *argv], stdout=subprocess.PIPE, text=True)
    if process.returncode:
        raise SystemExit(f"{' '.join(argv[:2])} failed with exit code {process.returncode}")
    return {"wall": time.perf_counter() - started, **json.loads(process.stdout.splitlines()[-1])}


def same_merges(a: Path, b: Path) -> str:
    merges = [json.loads(p.read_text())["model"]["merges"] for p in (a, b)]
    if merges[0] == merges[1]:
        return "the same merges"
    first = next((i for i, (x, y) in enumerate(zip(*merges)) if x != y), min(map(len, merges)))
    return f"merges differ from #{first}"


def spans(job: dict, label: str) -> list[dict]:
    return [s for s in job["spans"] if s["label"] == label]


def seconds(job: dict, label: str) -> float:
    return sum(s["end"] - s["start"] for s in spans(job, label))


def total(job: dict, label: str) -> float:
    return job["totals"].get(label, {}).get("seconds", 0.0)


def mib(kib: float) -> str:
    return f"{kib / MIB:.0f} MiB"


def job_label(job: dict) -> str:
    return job["library"] + ("" if job["guard"] else " (memory guard off)")


def headline(job: dict, engines: dict[str, dict]) -> list[str]:
    """Rows of the headline table: the job against each engine it is compared with."""
    peak = max(job["peak_kib"], job["max_sum_kib"])
    rows = []
    for name in ENGINES[job["library"]]:
        if name not in engines:
            continue
        engine = engines[name]
        rows.append(
            f"| {job_label(job)} | {name} | {engine['wall']:.1f} s | {engine['train']:.1f} s | {mib(engine['peak_kib'])} "
            f"| {job['wall']:.1f} s | {job['submit_to_registered']:.1f} s | {mib(job['peak_kib'])}"
            + (f" + child {mib(job['child_peak_kib'])} (sum at one moment {mib(job['max_sum_kib'])})"
               if job["child_peak_kib"] else "")
            + f" | **{job['wall'] / engine['wall']:.2f}×** | **{job['submit_to_registered'] / engine['train']:.2f}×** "
              f"| **{peak / engine['peak_kib']:.2f}×** | {engine['load']:.2f} / {job['load']:.2f} |")
    return rows


def breakdown(library: str, job: dict, engine: dict) -> list[str]:
    """Where the job's time goes, stage by stage, beside the engine's own phases."""
    stream = spans(job, "pass over the corpus (training)")
    stream_end = stream[0]["end"] if stream else 0.0
    train_start = spans(job, "train_version_files")[0]["start"]
    engine_start = spans(job, "engine (train_tokenizer)")[0]["start"]
    engine_end = spans(job, "engine (train_tokenizer)")[0]["end"]
    convert = seconds(job, "engine: merges to a Tokenizer")
    rows = [("process start and imports (before submit)", job["wall"] - job["submit_to_registered"],
             engine["wall"] - engine["train"], "interpreter, imports, engine/store/session set-up")]
    fixed = [("submit (submit_job, one transaction)", seconds(job, "submit")),
             ("claim (queued → running)", seconds(job, "claim")),
             ("corpus rows", seconds(job, "corpus rows")),
             ("lineage (package versions)", seconds(job, "lineage (package versions)")),
             ("train_version_files: before the engine (report, passes before training)", engine_start - train_start)]
    for label, value in fixed:
        rows.append((label, value, 0.0, ""))
    rows.append(("engine: until it takes the last text (the counting pass)", stream_end - engine_start,
                 engine.get("stream", 0.0), f"{job['passes_over_corpus']} pass(es) over the stored corpus"))
    if library == "rustbpe":
        rows.append(("engine: child learning after the last text + ranks back", engine_end - stream_end - convert,
                     engine["learn"] - engine.get("stream", 0.0), "pair counting and merges (GIL held, in the child)"))
        rows.append(("engine: ranks to a Tokenizer", convert, engine["convert"], ""))
    else:
        rows.append(("engine: merges after the last text", engine_end - stream_end,
                     engine["train"] - engine.get("stream", 0.0), ""))
    hashes = total(job, "hashing (TrainedFiles.hashes)")
    rows += [
        ("export: tokenizer.json (to_str), configs", seconds(job, "export: artifact_files")
         - seconds(job, "export: vocab.json + merges.txt") - seconds(job, "export: tokenizer.tiktoken"), 0.0, ""),
        ("export: vocab.json + merges.txt", seconds(job, "export: vocab.json + merges.txt"), 0.0, ""),
        ("export: tokenizer.tiktoken", seconds(job, "export: tokenizer.tiktoken"), 0.0, ""),
        ("export: manifest.json (hashing included)", seconds(job, "export: manifest"), 0.0,
         f"of which hashing {total(job, 'hashing (manifest)'):.3f} s"),
        ("hashing (TrainedFiles.hashes: every file again)", hashes, 0.0, ""),
        ("train_version_files: the rest", seconds(job, "train_version_files") - (engine_end - train_start)
         - seconds(job, "export (version_contents)") - hashes, 0.0, ""),
        ("store writes (put_bytes, every file)", total(job, "store writes (put_bytes)"), 0.0,
         f"{len(job['files'])} files, {sum(job['files'].values()) / MB:.1f} MB"),
        ("evaluation with no corpora (returns at once)", seconds(job, "evaluate (no corpora)"), 0.0,
         "the evaluation kernels are not imported"),
        ("register (one transaction)", seconds(job, "register"), 0.0, ""),
    ]
    accounted = sum(value for _, value, _, _ in rows[1:])
    rows.append(("unaccounted (run_claimed, heartbeat start/stop, reports)", job["submit_to_registered"] - accounted,
                 0.0, ""))
    lines = [f"| {label} | {value:.2f} s | {theirs:.2f} s | {value - theirs:+.2f} s | {note} |"
             for label, value, theirs, note in rows]
    lines.append(f"| **total (process wall)** | **{job['wall']:.2f} s** | **{engine['wall']:.2f} s** "
                 f"| **{job['wall'] - engine['wall']:+.2f} s** | |")
    concurrent = [f"{label}: {v['calls']} calls, {v['seconds']:.2f} s" for label, v in job["totals"].items()
                  if label.startswith(("memory guard", "heartbeat", "progress writes"))]
    lines.append(f"| (in threads, concurrent with the above) | | | | {'; '.join(concurrent)} |")
    return lines


def memory_rows(job: dict, engine: dict) -> list[str]:
    rows = [f"| after imports (before submit) | {mib(job['baseline_kib'])} | {mib(engine['baseline_kib'])} |"]
    for label in ("engine (train_tokenizer)", "export (version_contents)", "evaluate (no corpora)", "register"):
        for span in spans(job, label):
            child = f" (child {mib(span['child_hwm_kib'])})" if span["child_hwm_kib"] else ""
            rows.append(f"| VmHWM after {label} | {mib(span['hwm_kib'])}{child} | |")
    rows.append(f"| **peak** | **{mib(job['peak_kib'])}**"
                + (f" + child **{mib(job['child_peak_kib'])}**, at one moment **{mib(job['max_sum_kib'])}**"
                   if job["child_peak_kib"] else "")
                + f" | **{mib(engine['peak_kib'])}** |")
    rows.append(f"| the job's own PeakMemory (version row) | {job['version_peak_memory_bytes'] / 2**20:.0f} MiB | |")
    return rows


def report(results: dict, size: str) -> str:
    out = [f"corpus {size}, vocab {results['vocab']}, gpt2 regex; {results['loads']}", "",
           "| library | engine | engine wall | engine training alone | engine peak RSS | job wall (process) "
           "| job submit → registered | job peak RSS | wall vs engine | submit→registered vs training alone "
           "| peak RSS vs engine | load (engine / job) |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        for job in run["jobs"].values():
            out += headline(job, run["engines"])
    for run_index, run in enumerate(results["runs"], 1):
        for job in run["jobs"].values():
            library = job["library"]
            engine = run["engines"][ENGINE_OF[library]]
            out += ["", f"Run {run_index}, {job_label(job)}: the job against `{ENGINE_OF[library]}` "
                        f"({job['same_merges']}); passes over the stored corpus: {job['passes_over_corpus']}", "",
                    "| stage | job | engine alone | extra | note |", "|---|---|---|---|---|"]
            out += breakdown(library, job, engine)
            out += ["", "| memory | job | engine alone |", "|---|---|---|"]
            out += memory_rows(job, engine)
            out += ["", "| one pass over the corpus, alone | seconds | MB/s |", "|---|---|---|"]
            out += [f"| {label} | {value:.2f} s | {results['bytes'] / MB / value:.0f} |" if "interpreter" not in label
                    else f"| {label} | {value:.2f} s | |" for label, value in job["alone"].items()]
    if results.get("probes"):
        out += ["", f"tokenizers' counting pass alone ({PROBE_VOCAB}-token vocabulary: {PROBE_VOCAB - 257} merges), "
                    "each in a fresh process:", "",
                "| feed | train_from_iterator | last text taken at | peak RSS | GC collections (objects tracked) "
                "| load at start |", "|---|---|---|---|---|---|"]
        out += [f"| {p['probe']} | {p['seconds']:.1f} s | {p['stream']:.1f} s | {mib(p['peak_kib'])} "
                f"| {p['gc_collections']} ({p['gc_tracked']:,}) | {p['load']:.2f} |" for p in results["probes"]]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=100.0, help="corpus size, MB (10**6 bytes)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--libraries", nargs="+", default=list(ENGINES), choices=list(ENGINES))
    parser.add_argument("--runs", type=int, default=1, help="repeat engines and jobs this many times, interleaved")
    parser.add_argument("--markdown", type=Path, help="also write the tables here")
    parser.add_argument("--json", type=Path, help="also write every measured figure here, as JSON")
    parser.add_argument("--bare", action=argparse.BooleanOptionalAction, default=True,
                        help="also run bare tokenizers (train(files)) beside the iterator engine")
    parser.add_argument("--without-guard", action="store_true",
                        help="also run each job with the heartbeat's memory guard off (max_memory=None)")
    parser.add_argument("--probe", action=argparse.BooleanOptionalAction, default=True,
                        help="also time tokenizers' counting pass alone, fed five ways (PROBES)")
    parser.add_argument("--probe-repeats", type=int, default=1, help="run the probes this many times, interleaved")
    parser.add_argument("--probes-only", action="store_true", help="run the probes only (no engines, no jobs)")
    parser.add_argument("--child", choices=("ingest", "job", "probe"), help=argparse.SUPPRESS)
    parser.add_argument("--probe-name", help=argparse.SUPPRESS)
    parser.add_argument("--guard", choices=("on", "off"), default="on", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--library", help=argparse.SUPPRESS)
    parser.add_argument("--team", help=argparse.SUPPRESS)
    parser.add_argument("--corpus-id", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ingest":
        print(json.dumps(ingest_child(args.work, args.corpus)))
        return
    if args.child == "probe":
        print(json.dumps(probe_child(args.work, args.corpus, args.corpus_id, args.probe_name)))
        return
    if args.child == "job":
        print(json.dumps(job_child(args.work, args.corpus, args.library, args.vocab, args.team, args.corpus_id,
                                   args.guard == "on")))
        return

    work = Path(tempfile.mkdtemp(prefix="tm-job-overhead-"))
    start_load = os.getloadavg()
    try:
        corpus = work / "corpus.txt"
        corpus_file(corpus, int(args.mb * MB))
        size = f"{corpus.stat().st_size / MB:.1f} MB"
        print(f"{os.cpu_count()} cores, load average {start_load[0]:.2f} at start; corpus {size}", flush=True)
        ingest = run_child(["--child", "ingest", "--work", str(work), "--corpus", str(corpus)])
        print(f"ingested {ingest['lines']} lines in {ingest['ingest']:.1f} s (own process, peak "
              f"{mib(ingest['peak_kib'])})", flush=True)
        results = {"vocab": args.vocab, "bytes": corpus.stat().st_size, "ingest": ingest, "runs": []}
        for _ in range(0 if args.probes_only else args.runs):
            run = {"engines": {}, "jobs": {}}
            for library in args.libraries:
                for engine in ENGINES[library]:
                    if engine == BARE and not args.bare:
                        continue
                    load = os.getloadavg()[0]
                    output = work / f"{engine.replace(' ', '-')}.json"
                    run["engines"][engine] = {**train_speed.run(engine, corpus, args.vocab, output), "load": load,
                                              "output": str(output)}
                    print(f"{engine}: {run['engines'][engine]['wall']:.1f} s, "
                          f"{mib(run['engines'][engine]['peak_kib'])}", flush=True)
                for guard in ("on", "off") if args.without_guard else ("on",):
                    load = os.getloadavg()[0]
                    job = run_child(["--child", "job", "--work", str(work), "--corpus", str(corpus),
                                     "--library", library, "--vocab", str(args.vocab), "--team", ingest["team_id"],
                                     "--corpus-id", ingest["corpus_id"], "--guard", guard])
                    job["load"], job["wall"] = load, job["wall"] - job["after_done"]
                    reference = work / f"{ENGINE_OF[library].replace(' ', '-')}.json"
                    job["same_merges"] = "job vs engine: " + same_merges(Path(job["tokenizer_json"]), reference)
                    run["jobs"][job_label(job)] = job
                    print(f"job {job_label(job)}: {job['wall']:.1f} s process, {job['submit_to_registered']:.1f} s "
                          f"submit → registered, {mib(job['peak_kib'])}"
                          + (f" + child {mib(job['child_peak_kib'])}" if job["child_peak_kib"] else ""), flush=True)
            results["runs"].append(run)
        results["probes"] = []
        if args.probe and "tokenizers" in args.libraries:
            for name in [name for _ in range(args.probe_repeats) for name in PROBES]:
                load = os.getloadavg()[0]
                probe = run_child(["--child", "probe", "--work", str(work), "--corpus", str(corpus),
                                   "--corpus-id", ingest["corpus_id"], "--probe-name", name])
                results["probes"].append({**probe, "load": load})
                print(f"{name}: {probe['seconds']:.1f} s", flush=True)
        end_load = os.getloadavg()
        results["loads"] = (f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in start_load)} at the start, "
                            f"{', '.join(f'{x:.2f}' for x in end_load)} at the end; {os.cpu_count()} cores")
        text = report(results, size)
        print("\n" + text)
        if args.markdown:
            args.markdown.write_text(text + "\n")
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
