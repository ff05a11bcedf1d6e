"""Every figure of BENCHMARKS.md, one command each, in one run: what `make bench` runs.

Each figure is its own module with its own command line (the one its BENCHMARKS.md section
shows); this only runs them in order, each in a fresh process, writes each one's output to
<out>/<figure>.md as it comes, and ends with where each lands in BENCHMARKS.md (also written
to <out>/INDEX.md). A figure that fails does not stop the others; the exit code says so.

    .venv/bin/python -m benchmarks.run                        # every figure, full size (about an hour on 2 cores)
    .venv/bin/python -m benchmarks.run --quick                # small sizes: a smoke test, not a figure
    .venv/bin/python -m benchmarks.run --only train_speed job_overhead
    .venv/bin/python -m benchmarks.run --list
"""

import argparse
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCUMENT = REPO / "BENCHMARKS.md"


@dataclass(frozen=True)
class Figure:
    name: str
    module: str  # benchmarks.<name>, run as `python -m`
    args: tuple[str, ...]  # the command line BENCHMARKS.md shows
    quick: tuple[str, ...]  # small sizes, for --quick
    section: str | None  # the BENCHMARKS.md heading the figure lands under (None: no section yet)

    def command(self, quick: bool = False) -> list[str]:
        return [sys.executable, "-m", self.module, *(self.quick if quick else self.args)]

    def documented(self) -> str:
        """The command as BENCHMARKS.md writes it."""
        return shlex.join([".venv/bin/python", "-m", self.module, *self.args])


FIGURES = (
    Figure("upload_memory", "benchmarks.upload_memory", ("--gib", "1"), ("--gib", "0.02"),
           "Upload memory (issue 2: growth under 100 MB for a 1 GB corpus)"),
    Figure("upload_throughput", "benchmarks.upload_throughput", ("--mb", "100", "1024"), ("--mb", "5"),
           "Upload throughput (issue 12, item 3: ≥ 100 MB/s, growth < 100 MB per GB)"),
    Figure("eval_throughput", "benchmarks.eval_throughput", ("--mb", "16", "--train-mb", "6", "--runs", "3"),
           ("--mb", "0.3", "--train-mb", "0.3", "--vocab", "8000", "--runs", "1"), "Evaluation throughput (issue 4)"),
    Figure("combinations", "benchmarks.combinations", ("--lines", "1000"), ("--lines", "20"),
           "Training: every combination on one corpus (issue 3)"),
    Figure("train_speed", "benchmarks.train_speed", ("--mb", "10", "100", "500", "--engines", "tokenizers files", "rustbpe",
                                                     "tokenmill"), ("--mb", "0.3", "--vocab", "1000"),
           "Training speed: bare `tokenizers` against the rustbpe and tokenmill engines (issue 12, items 1 and 5)"),
    Figure("job_overhead", "benchmarks.job_overhead", ("--mb", "100"), ("--mb", "0.3", "--vocab", "1000"),
           "Job overhead: the training job against its engine (issue 12, item 2)"),
    Figure("distributed_counting", "benchmarks.distributed_counting", ("--mb", "100"),
           ("--mb", "0.3", "--vocab", "1000", "--part-mb", "0.1"),
           "Distributed counting: parts counted by several processes, merges learned from the counts (issue 12, item 4)"),
    Figure("regex_limit", "benchmarks.regex_limit", ("--mb", "10", "--rounds", "3"), ("--mb", "1", "--rounds", "1"),
           "A custom regex's time per document: what the bound costs (issue 20, item 3)"),
    Figure("noisy_neighbours", "benchmarks.noisy_neighbours", (), ("--only", "bpe_corpus", "quotas"),
           "Noisy neighbours: one team attacks, another reads (issue 20, item 8)"),
    Figure("counting_budget", "benchmarks.counting_budget", ("--mb", "100", "500", "--cap-mib", "400", "320", "290"),
           ("--mb", "3", "--vocab", "2000", "--part-mb", "1", "--held-out-mb", "0.5", "--cap-mib", "200"),
           "Distributed counting within a memory budget (issue 22, item 5)"),
    Figure("superword", "benchmarks.superword", ("--mb", "100", "--vocab", "32000", "64000"),
           ("--mb", "1", "--vocab", "2000", "--held-out-mb", "0.2"),
           "SuperBPE against plain BPE at the same vocabulary (issue 21, item 3)"),
    Figure("whole_evaluation", "benchmarks.whole_evaluation", ("--mb", "2000"), ("--mb", "3", "--part-mb", "0.5"),
           "Evaluation that scales: a sample against the whole corpus, one process against two (issue 22, item 3)"),
    Figure("mixtures", "benchmarks.mixtures", (), ("--unit-kb", "5", "--vocab", "1000", "--held-out", "20"),
           "Mixtures: a language temperature and the smallest language's premium (issue 25, item 1)"),
    Figure("metadata_load", "benchmarks.metadata_load", ("--training",),
           ("--seconds", "2", "--rounds", "1", "--corpora", "3", "--clients", "10"),
           "Metadata under load: each route against a bare endpoint (issue 22, item 4)"),
    Figure("split_speed", "benchmarks.split_speed", ("--mb", "100"), ("--mb", "0.3", "--rounds", "1"), None),
)
BY_NAME = {figure.name: figure for figure in FIGURES}


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    kept = "".join(c for c in heading.lower() if c.isalnum() or c in " -_")
    return "#" + kept.replace(" ", "-")


def run_figure(figure: Figure, quick: bool, out: Path) -> tuple[int, float]:
    """Run one figure's command, its output shown and written to out/<name>.md as it comes."""
    command = figure.command(quick)
    print(f"\n=== {figure.name}: {' '.join(command[1:])}", flush=True)
    started = time.perf_counter()
    with (out / f"{figure.name}.md").open("w") as log:
        log.write(f"<!-- {' '.join(['.venv/bin/python', *command[1:]])} -->\n")
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True, bufsize=1)
        for line in process.stdout:
            sys.stdout.write(line)
            log.write(line)
            log.flush()
        code = process.wait()
    return code, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes, to check the commands run (not figures)")
    parser.add_argument("--only", nargs="+", choices=list(BY_NAME), help="only these figures, in the usual order")
    parser.add_argument("--out", type=Path, help="where each figure's output goes (build/bench, or build/bench-quick)")
    parser.add_argument("--list", action="store_true", help="print every figure's command and section, run nothing")
    args = parser.parse_args(argv)
    figures = [f for f in FIGURES if not args.only or f.name in args.only]
    if args.list:
        for figure in figures:
            print(f"{figure.name}: {figure.documented()}\n    → BENCHMARKS.md § {figure.section or '(no section yet)'}")
        return 0
    out = args.out or REPO / "build" / ("bench-quick" if args.quick else "bench")
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(figures)} figure(s){' (quick sizes)' if args.quick else ''}, output in {out}; "
          f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores", flush=True)
    index = []
    for figure in figures:
        code, seconds = run_figure(figure, args.quick, out)
        state = "ok" if code == 0 else f"FAILED (exit {code})"
        written = out / f"{figure.name}.md"
        shown = written.relative_to(REPO) if written.is_relative_to(REPO) else written
        lands = (f"BENCHMARKS.md § \"{figure.section}\" ({DOCUMENT.name}{anchor(figure.section)})" if figure.section
                 else "no BENCHMARKS.md section yet")
        index.append(f"- {figure.name}: {state}, {seconds:.0f} s — `{shown}` → {lands}")
    summary = "\n".join(index)
    (out / "INDEX.md").write_text(f"# Benchmark run{' (quick sizes)' if args.quick else ''}\n\n{summary}\n")
    print(f"\nWhere each figure lands:\n{summary}\n(also in {out / 'INDEX.md'})")
    return 0 if all(" ok," in line for line in index) else 1


if __name__ == "__main__":
    sys.exit(main())
