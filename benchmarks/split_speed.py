"""Pre-tokenization per process: Python's `regex` + `Counter` against the compiled splitter (issue 22, item 1).

Builds the corpus of --mb from /work/shared/corpora as benchmarks.train_speed does, reads its
lines (the documents training counts) into memory, and for each preset, --rounds times, counts
the pieces of all the lines in this process, one way after the other:

- `regex`: `spills.count(lines, spills.split_by(pattern, None))`, what a counting child of
  `library: tokenmill` does today (`regex.findall`, then `Counter.update`);
- `count()`: `tokenmill.training.splitting.counting.count(lines, the same split)`, the one-line
  change: split and counted in compiled code, handed back as the same `Counter[str]`;
- `arrays`: `counted(lines, preset).arrays()`: the three arrays a child sends back, no str per piece;
- `frames`: `counted_frames` over the lines as `text_frames` sends them down a child's pipe
  (a child that reads its frames as they are: no str at all; writing the frames is not timed).

MB/s is corpus MB (10**6 bytes of UTF-8) over the process's CPU seconds (`time.process_time`:
what one core gives it, which the load of a shared machine changes less than the wall clock),
wall seconds beside it; the ratio to `regex` is taken within a round (the ways back to back),
and its median over the rounds is printed. Each round checks that `count()` gives `regex`'s
counts. Then, once per preset, `counted_in_threads` on --threads threads of this one process:
wall MB/s. Memory: the distinct pieces' `Counter` (its dict and str objects, sys.getsizeof)
against the splitter's table (its arrays).

With --train, what wiring it into `library: tokenmill` could give, before it is wired: the
whole training at --vocab on the same corpus, each in a fresh process as benchmarks.train_speed
runs them (wall time, peak RSS of the process tree), `tokenizers files` (bare), `tokenmill`
(today's engine: counting children with `regex`) and `splitter threads`: the lines counted by
`counted_in_threads` on every core of the one process, then `merge_learner` and `to_tokenizer`
as `train_tokenmill` does; its tokenizer must be `tokenmill`'s, byte for byte (gpt2 regex).

    .venv/bin/python -m benchmarks.split_speed --mb 100
    .venv/bin/python -m benchmarks.split_speed --mb 100 --train --rounds 2
"""

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.train_speed import MB, corpus_file

PRESETS = ("gpt2", "cl100k", "o200k")
WAYS = ("regex", "count()", "arrays", "frames")


def timed(work):
    """What work() returns, its CPU seconds and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = work()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def counter_mib(counts: Counter) -> float:
    """A Counter[str]'s memory: its dict and its keys (its counts are small ints, mostly shared)."""
    return (sys.getsizeof(counts) + sum(map(sys.getsizeof, counts))) / 2**20


def train_child(corpus: Path, vocab: int, output: Path) -> None:
    """`splitter threads`, in this (fresh) process: print what it measured as train_speed's children do."""
    from benchmarks.train_speed import SPECIAL, high_water_kib, lines
    from tokenmill.training.merge_learner import learn_merges_of
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.splitting.counting import counted_in_threads, preset_of
    from tokenmill.training.with_rustbpe import to_tokenizer
    from tokenmill.training.with_tokenmill import merges_wanted

    spec = resolve_spec({"library": "tokenmill", "vocab_size": vocab, "pre_tokenizer": "gpt2",
                         "special_tokens": [SPECIAL]})
    baseline = high_water_kib()
    started = time.perf_counter()
    preset = preset_of(spec.regex_pattern or "")
    assert preset is not None
    lengths, counts, data = counted_in_threads(lines(corpus), preset, os.cpu_count() or 1)
    counted, counted_kib = time.perf_counter() - started, high_water_kib()
    tokenizer = to_tokenizer(spec, learn_merges_of(data, lengths, counts, merges_wanted(spec)))
    seconds = time.perf_counter() - started
    output.write_text(tokenizer.to_str())
    print(json.dumps({"train": seconds, "stream": counted, "counted_kib": counted_kib, "baseline_kib": baseline,
                      "peak_kib": high_water_kib(),
                      "vocab": tokenizer.get_vocab_size()}))


def train(corpus: Path, vocab: int, rounds: int) -> None:
    """The three engines on the corpus, --rounds times (see the module docstring)."""
    from benchmarks.train_speed import run

    work = corpus.parent
    print("\n| round | engine | wall | peak RSS | wall vs bare | RSS vs bare | counted by | load |")
    print("|---|---|---|---|---|---|---|---|")
    for round_ in range(1, rounds + 1):
        results = {}
        for engine in ("tokenizers files", "tokenmill", "splitter threads"):
            output = work / f"{engine.replace(' ', '-')}.json"
            load = os.getloadavg()[0]
            if engine == "splitter threads":
                started = time.perf_counter()
                done = subprocess.run([sys.executable, "-m", "benchmarks.split_speed", "--train-child", "--corpus",
                                       str(corpus), "--vocab", str(vocab), "--output", str(output)],
                                      capture_output=True, text=True, check=True)
                result = {"wall": time.perf_counter() - started, **json.loads(done.stdout.splitlines()[-1])}
            else:
                result = run(engine, corpus, vocab, output)
            results[engine] = result
            base = results["tokenizers files"]
            counted = f"{result['stream']:.1f} s" if "stream" in result else "–"
            if "counted_kib" in result:
                counted += f", {result['counted_kib'] / 1024:.0f} MiB then"
            print(f"| {round_} | {engine} | {result['wall']:.1f} s | {result['peak_kib'] / 1024:.0f} MiB | "
                  f"{result['wall'] / base['wall']:.2f}× | {result['peak_kib'] / base['peak_kib']:.2f}× | {counted} | "
                  f"{load:.1f} |", flush=True)
        if (work / "tokenmill.json").read_text() != (work / "splitter-threads.json").read_text():
            raise SystemExit("splitter threads did not give library tokenmill's tokenizer")
    print("\nsplitter threads gave library tokenmill's tokenizer.json, byte for byte, in every round")


def main() -> None:
    from tokenmill.training.counting import spills
    from tokenmill.training.patterns import PATTERNS
    from tokenmill.training.splitting import counting
    from tokenmill.training.text_frames import batches, frames, write_texts

    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=100.0, help="corpus size, MB (10**6 bytes)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--train", action="store_true", help="the whole training instead (see the docstring)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--train-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train_child:
        train_child(args.corpus, args.vocab, args.output)
        return
    with tempfile.TemporaryDirectory(prefix="tm-split-speed-") as work:
        path = Path(work) / "corpus.txt"
        corpus_file(path, int(args.mb * MB))
        size = path.stat().st_size / MB
        if args.train:
            print(f"{size:.1f} MB, vocab {args.vocab}, gpt2 regex; {os.cpu_count()} cores, "
                  f"load average {os.getloadavg()[0]:.2f} at start")
            train(path, args.vocab, args.rounds)
            return
        lines = path.read_text(encoding="utf-8").split("\n")
    stream = io.BytesIO()
    for batch in batches(lines):
        write_texts(stream, batch)
    framed = stream.getvalue()
    del stream
    counting.warm_up()  # compiled (or loaded from numba's cache) before anything is timed
    load = os.getloadavg()
    print(f"{size:.1f} MB, {len(lines):,} lines; {os.cpu_count()} cores, load average {load[0]:.2f} at start\n")
    print("| preset | round | way | CPU | wall | MB/s (CPU) | vs regex (CPU) | vs regex (wall) | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    summary = []
    for preset in PRESETS:
        split = spills.split_by(PATTERNS[preset], None)
        ratios: dict[str, list[float]] = {way: [] for way in WAYS[1:]}
        memory = ""
        for round_ in range(1, args.rounds + 1):
            expected, cpu, wall = timed(lambda: spills.count(lines, split))
            base = (cpu, wall)
            measured = {"regex": (cpu, wall)}
            ours, cpu, wall = timed(lambda: counting.count(lines, split))
            if ours != expected:
                raise SystemExit(f"{preset}: the splitter's counts are not regex's")
            measured["count()"] = (cpu, wall)
            counter, cpu, wall = timed(lambda: counting.counted(lines, preset))
            counter.arrays()
            measured["arrays"] = (cpu, wall)
            _, cpu, wall = timed(lambda: counting.counted_frames(frames(io.BytesIO(framed)), preset).arrays())
            measured["frames"] = (cpu, wall)
            if round_ == 1:
                table = sum(a.nbytes for a in (counter._rows, counter._numbers, counter._starts, counter._keys))
                memory = (f"{len(expected):,} distinct pieces: Counter {counter_mib(expected):.0f} MiB, "
                          f"table {table / 2**20:.0f} MiB")
            del expected, ours, counter
            load = os.getloadavg()[0]
            for way, (cpu, wall) in measured.items():
                vs_cpu, vs_wall = base[0] / cpu, base[1] / wall
                if way != "regex":
                    ratios[way].append(vs_cpu)
                print(f"| {preset} | {round_} | {way} | {cpu:.1f} s | {wall:.1f} s | {size / cpu:.1f} | "
                      f"{vs_cpu:.1f}× | {vs_wall:.1f}× | {load:.1f} |", flush=True)
        _, cpu, wall = timed(lambda: counting.counted_in_threads(lines, preset, args.threads))
        threads = f"{args.threads} threads: {size / wall:.0f} MB/s wall ({cpu:.1f} s CPU)"
        medians = ", ".join(f"{way} {statistics.median(values):.1f}×" for way, values in ratios.items())
        summary.append(f"- {preset}: median over {args.rounds} rounds, CPU: {medians}; {threads}; {memory}")
    end = os.getloadavg()
    print(f"\nload average {', '.join(f'{x:.2f}' for x in end)} at the end (1, 5, 15 min)\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
