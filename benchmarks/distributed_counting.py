"""Distributed counting (`counting: distributed`) against rustbpe's streamed training, on one file.

Builds the corpus of --mb from /work/shared/corpora as benchmarks.train_speed does, stores it
in a local store (a folder), and then, each in fresh processes so every peak RSS is its own
(the child's VmHWM):

- `rustbpe streamed`: rustbpe counting and merging the file's lines in one process
  (`tokenmill.training.with_rustbpe.learn_ranks`);
- `count, N workers`: the file cut into --part-mb byte ranges, counted by N processes at once
  (parts dealt round robin; each process pre-tokenizes with Python's `regex`, counts, and
  spills each part's counts to the store: `tokenmill.corpora.ranges` and `tokenmill.training.counting.spills`), wall time of the slowest;
- `merge + learn`: one process merging the spills (streamed, min_frequency 0) and learning the
  merges from the counts (`tokenmill.training.merge_learner`), conversion to ranks included; then again
  with min_frequency 2 (the spec's default), which drops the pieces seen once.

It checks that the merges learned from the counts are rustbpe's, token for token, and prints
the Markdown table BENCHMARKS.md holds.

    .venv/bin/python -m benchmarks.distributed_counting --mb 100
"""

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import child_runs
from benchmarks.train_speed import corpus_file, high_water_kib

KEY = "corpora/bench/corpus"


def _spec(vocab: int):
    from tokenmill.training.spec import resolve_spec

    return resolve_spec({"library": "rustbpe", "vocab_size": vocab, "min_frequency": 0, "special_tokens": [],
                         "counting": "distributed"})


def _corpus(root: Path):
    from tokenmill.models import Corpus

    size = (root / KEY).stat().st_size
    return Corpus(storage_key=KEY, bytes=size, format="text", text_field=None)


def child_streamed(root: Path, vocab: int) -> dict:
    from tokenmill.training.with_rustbpe import learn_ranks

    started = time.monotonic()
    with (root / KEY).open(encoding="utf-8") as handle:
        tokens = learn_ranks(_spec(vocab), (line.rstrip("\n") for line in handle if line.strip()))
    return {"seconds": time.monotonic() - started, "tokens": [token.hex() for token in tokens]}


def child_count(root: Path, vocab: int, part_mb: float, worker: int, workers: int) -> dict:
    from tokenmill.corpora import ranges
    from tokenmill.store import LocalStore
    from tokenmill.training.counting import spills

    store = LocalStore(root)
    started = time.monotonic()
    split = spills.splitter(_spec(vocab))
    planned = ranges.plan([_corpus(root)], int(part_mb * 2**20))
    for number, part in enumerate(planned):
        if number % workers == worker:
            counts = spills.count(ranges.part_documents(store, part), split)
            store.put_bytes(f"spills/{number}", spills.spilled(counts))
    return {"seconds": time.monotonic() - started, "parts": len(planned)}


def child_learn(root: Path, vocab: int, min_count: int) -> dict:
    from tokenmill.store import LocalStore
    from tokenmill.training.counting import spills
    from tokenmill.training.merge_learner import learn_merges

    store = LocalStore(root)
    started = time.monotonic()
    keys = sorted(stored.key for stored in store.list_objects("spills/"))
    merged = spills.merged([spills.records(store.iter_chunks(key, spills.SPILL_READ)) for key in keys],
                                 min_count)
    tokens = [bytes([byte]) for byte in range(256)] + [left + right for left, right in learn_merges(merged, vocab - 256)]
    return {"seconds": time.monotonic() - started, "tokens": [token.hex() for token in tokens]}


def run(*args: str) -> subprocess.Popen:
    return child_runs.start("benchmarks.distributed_counting", *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=100)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--part-mb", type=float, default=16)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, root, *rest = args.child
        if kind == "streamed":
            out = child_streamed(Path(root), int(rest[0]))
        elif kind == "count":
            out = child_count(Path(root), int(rest[0]), float(rest[1]), int(rest[2]), int(rest[3]))
        else:
            out = child_learn(Path(root), int(rest[0]), int(rest[1]))
        out["peak_mib"] = high_water_kib() / 1024
        print(json.dumps(out))
        return

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / KEY).parent.mkdir(parents=True)
        corpus_file(root / KEY, int(args.mb * 1e6))
        load = os.getloadavg()[0]
        rows = []
        started = time.monotonic()
        streamed = child_runs.result(run("streamed", folder, str(args.vocab)))
        streamed["wall"] = time.monotonic() - started
        rows.append(("rustbpe streamed (one process)", streamed["wall"], streamed["peak_mib"], ""))
        learned = None
        for workers in args.workers:
            for spill in (root / "spills").glob("*") if (root / "spills").exists() else []:
                spill.unlink()
            started = time.monotonic()
            counters = [run("count", folder, str(args.vocab), str(args.part_mb), str(w), str(workers))
                        for w in range(workers)]
            counted = [child_runs.result(process) for process in counters]
            count_wall = time.monotonic() - started
            started = time.monotonic()
            learned = child_runs.result(run("learn", folder, str(args.vocab), "1"))
            learn_wall = time.monotonic() - started
            parts = counted[0]["parts"]
            rows.append((f"count, {workers} worker process{'es' if workers > 1 else ''} ({parts} parts)", count_wall,
                         max(c["peak_mib"] for c in counted), "peak of one worker"))
            rows.append(("merge + learn (one process)", learn_wall, learned["peak_mib"], ""))
            rows.append((f"total with {workers}", count_wall + learn_wall,
                         max(learned["peak_mib"], *(c["peak_mib"] for c in counted)), ""))
        started = time.monotonic()
        pruned = child_runs.result(run("learn", folder, str(args.vocab), "2"))
        rows.append(("merge + learn, min_frequency 2 (pieces seen once dropped)", time.monotonic() - started,
                     pruned["peak_mib"], f"{len(set(pruned['tokens']) & set(streamed['tokens']))} of "
                                         f"{len(streamed['tokens'])} tokens also in rustbpe's vocabulary"))
        same = learned is not None and learned["tokens"] == streamed["tokens"]
        print(f"\n{args.mb:g} MB, vocab {args.vocab}, gpt2 regex, parts of {args.part_mb:g} MiB, load {load:.1f}; "
              f"merges from the counts {'equal' if same else 'DIFFER from'} rustbpe's ({len(streamed['tokens'])} tokens)\n")
        print("| step | wall s | peak RSS MiB | |")
        print("|---|---|---|---|")
        for label, wall, peak, note in rows:
            print(f"| {label} | {wall:.1f} | {peak:.0f} | {note} |")
        if not same:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
