"""Distributed counting within a memory budget (issue 22, item 5).

Builds the corpus of --mb from /work/shared/corpora as benchmarks.train_speed does, keeps its
last --held-out-mb out of training, stores the rest in a local store (a folder), and then, each
step in a fresh process so every peak RSS is its own (the child's VmHWM):

- `count`: the file cut into --part-mb byte ranges, counted by --workers processes at once,
  each part as a helper counts it (`tokenmill.training.splitting.counting.count`: the compiled
  splitter for the gpt2 preset) and spilled to the store; the counting rate per process is the
  corpus MB over the processes' summed CPU seconds;
- `merge + learn`: one process merging the spills and gathering the merged counts as a job
  does (`tokenmill.training.counting.merge.gathered`, min_frequency 2), then learning --vocab merges
  (`merge_learner`), once with no budget and once for each --cap-mib: the budget a job's worker
  gets under TOKENMILL_JOB_MAX_MEMORY_BYTES = cap (80 % of what the process does not hold yet).

For each: wall time, peak RSS (of merging and learning: taken before the held-out text is
encoded, which the runs before 2026-12-04 19:00 UTC counted too), the count threshold reached, the distinct pieces dropped and
their share of all occurrences, and the held-out text's bytes per token with the merges learned
(the cost of pruning).

    .venv/bin/python -m benchmarks.counting_budget --mb 100 500 --cap-mib 400 320 290
"""

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from benchmarks import child_runs
from benchmarks.train_speed import corpus_with_held_out, high_water_kib

KEY = "corpora/bench/corpus"


def _spec(vocab: int):
    from tokenmill.training.spec import resolve_spec

    return resolve_spec({"library": "tokenmill", "vocab_size": vocab, "special_tokens": [], "counting": "distributed"})


def child_count(root: Path, vocab: int, part_mb: float, worker: int, workers: int) -> dict:
    from tokenmill.allocator import map_large_blocks
    from tokenmill.corpora import ranges
    from tokenmill.models import Corpus
    from tokenmill.store import LocalStore
    from tokenmill.training.counting import spills
    from tokenmill.training.splitting.counting import count, warm_up

    map_large_blocks()  # as a worker sets it for its children (workers/tasks.py)
    warm_up()
    store = LocalStore(root)
    corpus = Corpus(storage_key=KEY, bytes=(root / KEY).stat().st_size, format="text", text_field=None)
    split = spills.splitter(_spec(vocab))
    started, cpu = time.monotonic(), time.process_time()
    counted = 0
    for number, part in enumerate(ranges.plan([corpus], int(part_mb * 2**20))):
        if number % workers == worker:
            store.put_bytes(f"spills/{number}", spills.spilled(count(ranges.part_documents(store, part), split)))
            counted += part.end - part.start
    return {"seconds": time.monotonic() - started, "cpu": time.process_time() - cpu, "bytes": counted}


def child_learn(root: Path, vocab: int, cap_mib: int, held_out: str) -> dict:
    from tokenmill.allocator import map_large_blocks
    from tokenmill.store import LocalStore
    from tokenmill.training.counting import spills
    from tokenmill.training.counting.merge import gathered, learner_budget
    from tokenmill.training.merge_learner import warm_up
    from tokenmill.training.with_tokenmill import learned_from_counts

    map_large_blocks()  # as a worker sets it for its children (workers/tasks.py)
    warm_up()  # what a job's worker holds before it merges: the learner compiled, the libraries loaded
    store = LocalStore(root)
    spec = _spec(vocab)
    started = time.monotonic()
    keys = sorted(stored.key for stored in store.list_objects("spills/"))
    merged = spills.merged([spills.records(store.iter_chunks(key, spills.SPILL_READ)) for key in keys])
    budget = learner_budget(cap_mib * 2**20 if cap_mib else None)
    pruned = []

    def counted():  # as a job's coordinator does: only the learner holds the counts while it learns
        counts, kept = gathered(merged, spec.min_frequency, budget)
        pruned.append(kept)
        return counts

    tokenizer = learned_from_counts(spec, counted)
    seconds, peak_mib = time.monotonic() - started, high_water_kib() / 1024  # before the held-out text is encoded
    text = Path(held_out).read_text(encoding="utf-8")
    tokens = sum(len(encoding.ids) for encoding in tokenizer.encode_batch(text.splitlines()))
    return {"seconds": seconds, "peak_mib": peak_mib, "pruned": pruned[0].record(),
            "bytes_per_token": len(text.encode()) / max(tokens, 1)}


def run(*args: str) -> subprocess.Popen:
    return child_runs.start("benchmarks.counting_budget", *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, nargs="+", default=[100.0])
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--part-mb", type=float, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--held-out-mb", type=float, default=2)
    parser.add_argument("--cap-mib", type=int, nargs="+", default=[400])
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, root, *rest = args.child
        if kind == "count":
            out = child_count(Path(root), int(rest[0]), float(rest[1]), int(rest[2]), int(rest[3]))
        else:
            out = child_learn(Path(root), int(rest[0]), int(rest[1]), rest[2])
        out.setdefault("peak_mib", high_water_kib() / 1024)
        print(json.dumps(out))
        return

    for mb in args.mb:
        measure(mb, args)


def measure(mb: float, args: argparse.Namespace) -> None:
    """Every step on a corpus of `mb` MB, its table printed."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / KEY).parent.mkdir(parents=True)
        held_out = root / "held_out.txt"
        corpus_with_held_out(root / KEY, held_out, mb, args.held_out_mb)
        load = os.getloadavg()[0]
        started = time.monotonic()
        counted = [child_runs.result(p) for p in [run("count", folder, str(args.vocab), str(args.part_mb), str(w), str(args.workers))
                                       for w in range(args.workers)]]
        count_wall = time.monotonic() - started
        rate = sum(c["bytes"] for c in counted) / 1e6 / max(sum(c["cpu"] for c in counted), 1e-9)
        print(f"\n{mb:g} MB (+ {args.held_out_mb:g} MB held out), vocab {args.vocab}, gpt2 regex, min_frequency 2, "
              f"parts of {args.part_mb:g} MiB, load {load:.1f}\n")
        print(f"count: {args.workers} processes, {count_wall:.1f} s wall, {rate:.1f} MB/s per process (CPU), "
              f"peak {max(c['peak_mib'] for c in counted):.0f} MiB a process\n")
        print("| merge + learn | wall s | peak RSS MiB | threshold | pieces kept | pieces dropped | "
              "occurrences dropped | held-out bytes/token |")
        print("|---|---|---|---|---|---|---|---|")
        for cap in [0, *args.cap_mib]:
            learned = child_runs.result(run("learn", folder, str(args.vocab), str(cap), str(held_out)))
            pruned = learned["pruned"]
            label = f"cap {cap} MiB" if cap else "no cap"
            print(f"| {label} | {learned['seconds']:.1f} | {learned['peak_mib']:.0f} | {pruned['threshold']} | "
                  f"{pruned['pieces_kept']:,} | {pruned['pieces_dropped']:,} | {100 * pruned['dropped_share']:.2f} % | "
                  f"{learned['bytes_per_token']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
