"""Training wall time and peak memory: bare `tokenizers` against the rustbpe engine, on the same text.

Builds a corpus of each --mb size from /work/shared/corpora (man pages, code, Debian Reference,
fortunes, Bible, Quijote, TeX, licences: the same share of every file, whole files repeated past
their ~106 MB), writes it to a temporary file, and trains a byte-level BPE of --vocab tokens
with the gpt2 regex in a fresh process per engine, so each peak RSS is the engine's own: the
child's VmHWM, which wait4's ru_maxrss equals except that Linux carries the parent's high-water
mark over into the child at exec (a parent grown to 140 MB would floor every child's figure there):

- `tokenizers files`: bare `tokenizers`, `Tokenizer.train([file])` with a BpeTrainer (Rust reads the file);
- `tokenizers iterator`: `tokenmill.training.with_tokenizers.train` on the file's lines, streamed from Python (today's engine);
- `rustbpe`: `tokenmill.training.with_rustbpe.train_rustbpe` on the same stream, conversion to a Tokenizer included;
- `tokenmill`: `tokenmill.training.with_tokenmill.train_tokenmill` on the same stream: the gpt2
  preset split and counted by the compiled splitter on one thread per core (a custom regex or a
  normalizer would be counted by one child process per core), learned in the engine's process.
  Its peak RSS is the highest of the engine's VmHWM and the sum of its and its children's RSS at
  one moment (sampled every 0.1 s). The spec is checked as the API checks it, whose sandbox
  processes are stopped before anything is measured: a job trains from its stored spec, with
  none. Its wall time includes loading the compiled code from numba's cache, which a worker
  does once, when it starts. Its training-alone column also says
  how long learning the merges from the counts took (`merge_learner.learned`, from the pieces
  `pieces_to_merge` made of the counts; loading the learner's compiled code from the cache
  included), in wall time and in its thread's CPU
  time, which a machine shared with other work disturbs less.

Wall time is the child process's, interpreter start and imports included (its own
training-only time is printed beside it). Afterwards the vocabularies are compared with
bare `tokenizers`' one: tokens in common, first differing merge, and tokens needed for
held-out FLORES lines.

Rows are printed as they are measured (every column, with the load average at the row's
start); at the end the whole table, engine x corpus size x wall x peak RSS x ratios to bare
`tokenizers`, is printed again as the Markdown BENCHMARKS.md holds (also written to
--markdown, and every figure to --json, when given). Past ~106 MB the corpus is the same
files again, so a 500 MB corpus has 100 MB's distinct pieces, each counted about five times.

    .venv/bin/python -m benchmarks.train_speed --mb 10 100 500
"""

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOMAINS = ("manpages", "code", "debian_reference", "fortunes", "bible", "book_quijote", "math_tex", "legal")
ENGINES = ("tokenizers files", "tokenizers iterator", "rustbpe", "tokenmill")
SPECIAL = "<|endoftext|>"
MB = 1_000_000


def corpus_file(path: Path, size: int, mix: bool = False) -> None:
    """`size` bytes (cut at a line end) of every source file in the same share, repeated if need
    be; with `mix`, the issue's other mix: half English, a quarter code, a quarter every other
    language, each group's files in the same share."""
    from tests.services import (
        CORPORA,  # here, not at the top: the children measured never import it (boto3, redis: 44 MiB)
    )

    sources = sorted(p for domain in DOMAINS for p in (CORPORA / domain).glob("*.txt"))
    if not mix:
        groups = [(sources, size)]
    else:
        code = [p for p in sources if p.parent.name == "code"]
        english = [p for p in sources if p.stem == "eng_Latn"]
        others = [p for p in sources if p not in code and p not in english and p.parent.name != "math_tex"]
        groups = [(english, size // 2), (code, size // 4), (others, size - size // 2 - size // 4)]
    with path.open("wb") as out:
        for group, group_size in groups:
            _fill(out, group, group_size)


def _fill(out, sources: list[Path], size: int) -> None:
    # `size` bytes of the sources in the same share, repeated if need be, each cut at a line end.
    total = sum(p.stat().st_size for p in sources)
    written = 0
    while written < size:
        share = min(1.0, (size - written) / total)
        for source in sources:
            data = source.read_bytes()
            piece = data[: int(len(data) * share)]
            piece = piece[: piece.rfind(b"\n") + 1]
            out.write(piece)
            written += len(piece)
        if share < 1.0:
            break


def lines(path: Path):
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield line.rstrip("\n")


def streamed(texts, parts: dict, started: float):
    """The texts, noting in parts["stream"] when the engine has taken the last one (its counting pass's end)."""
    yield from texts
    parts["stream"] = time.perf_counter() - started


def corpus_with_held_out(training: Path, held_out: Path, mb: float, held_out_mb: float) -> None:
    """`corpus_file` of mb + held_out_mb MB, cut at a line end: the first mb MB to `training`, the rest to `held_out`."""
    whole = training.with_name(training.name + ".whole")
    corpus_file(whole, int((mb + held_out_mb) * 1e6))
    data = whole.read_bytes()
    whole.unlink()
    cut = data.rfind(b"\n", 0, len(data) - int(held_out_mb * 1e6)) + 1
    training.write_bytes(data[:cut])
    held_out.write_bytes(data[cut:])


def high_water_kib(field: str = "VmHWM") -> int:
    """This process's peak resident memory so far, KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def child(engine: str, corpus: Path, vocab: int, output: Path) -> None:
    """Train one engine in this (fresh) process and print what it measured as JSON."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    from tokenmill.sandboxed import sandbox
    from tokenmill.training import with_tokenizers
    from tokenmill.training.patterns import PATTERNS
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.with_rustbpe import learn_ranks, merge_pairs, to_tokenizer

    spec = resolve_spec({"vocab_size": vocab, "pre_tokenizer": "gpt2", "special_tokens": [SPECIAL]})
    sandbox.close()  # the spec's check ran in sandbox processes, which a job does not have (it reads its stored spec)
    if engine == "tokenmill":
        from tokenmill.allocator import map_large_blocks

        map_large_blocks()  # as a worker sets it for its children (workers/tasks.py)
    baseline = high_water_kib()
    started = time.perf_counter()
    parts = {}
    if engine == "tokenizers files":
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(PATTERNS["gpt2"]), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        tokenizer.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=[SPECIAL],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
        tokenizer.train([str(corpus)], trainer)
    elif engine == "tokenizers iterator":
        tokenizer = with_tokenizers.train(spec, streamed(lines(corpus), parts, started))
    elif engine == "tokenmill":
        from tokenmill.training import merge_learner
        from tokenmill.training.with_tokenmill import train_tokenmill

        learn = merge_learner.learned

        def timed_learning(*args):  # the engine looks the learner up when it learns: timed apart from counting
            begun, cpu = time.perf_counter(), time.thread_time()
            try:
                return learn(*args)
            finally:
                parts["merges"] = time.perf_counter() - begun
                parts["merges_cpu"] = time.thread_time() - cpu

        merge_learner.learned = timed_learning
        tokenizer = train_tokenmill(spec.model_copy(update={"library": "tokenmill"}),
                                    streamed(lines(corpus), parts, started))
    else:
        ranks = learn_ranks(spec, streamed(lines(corpus), parts, started))
        parts["learn"] = time.perf_counter() - started
        tokenizer = to_tokenizer(spec, merge_pairs(ranks))
        parts["convert"] = time.perf_counter() - started - parts["learn"]
    seconds = time.perf_counter() - started
    peak = high_water_kib()
    output.write_text(tokenizer.to_str())
    print(json.dumps({"train": seconds, "baseline_kib": baseline, "peak_kib": peak, "vocab": tokenizer.get_vocab_size(),
                      **parts}))


def run(engine: str, corpus: Path, vocab: int, output: Path) -> dict:
    """Run one engine in a child process: its wall time, peak RSS and what it printed."""
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.train_speed", "--child", engine,
                                "--corpus", str(corpus), "--vocab", str(vocab), "--output", str(output)],
                               stdout=subprocess.PIPE, text=True)
    tree_kib = tree_peak_kib(process) if engine == "tokenmill" else 0
    out, _ = process.communicate()
    if process.returncode:
        raise SystemExit(f"{engine} failed with exit code {process.returncode}")
    result = {"wall": time.perf_counter() - started, **json.loads(out.splitlines()[-1])}
    if tree_kib > result["peak_kib"]:
        result.update(peak_kib=tree_kib, own_peak_kib=result["peak_kib"])
    return result


def tree_peak_kib(process: subprocess.Popen, every: float = 0.1) -> int:
    """The highest sum of a running process's RSS and its children's, KiB, sampled until it ends."""
    import psutil

    engine, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):  # a child ended between the listing and the reading
            peak = max(peak, sum(p.memory_info().rss for p in (engine, *engine.children(recursive=True))) // 1024)
        time.sleep(every)
    return peak


def compare(reference: Path, other: Path, held_out: list[str]) -> str:
    """Vocabulary overlap, first differing merge and held-out token count against the reference."""
    from tokenizers import Tokenizer

    ours, theirs = Tokenizer.from_file(str(other)), Tokenizer.from_file(str(reference))
    shared = len(set(ours.get_vocab()) & set(theirs.get_vocab())) / theirs.get_vocab_size()
    merges = [json.loads(t.to_str())["model"]["merges"] for t in (ours, theirs)]
    first = next((i for i, (a, b) in enumerate(zip(*merges)) if a != b), None)
    tokens = [sum(len(e.ids) for e in t.encode_batch(held_out, add_special_tokens=False)) for t in (ours, theirs)]
    order = "the same merges" if first is None else f"merges differ from #{first}"
    return f"{shared:.1%} of tokens shared, {order}, held-out tokens {tokens[0] / tokens[1]:.4f}×"


def ratios(result: dict, base: dict | None) -> str:
    """Wall and peak RSS against bare tokenizers' on the same corpus, as two table cells."""
    if base is None:
        return "– | –"
    if base is result:
        return "1.00× | 1.00×"
    return f"**{result['wall'] / base['wall']:.2f}×** | **{result['peak_kib'] / base['peak_kib']:.2f}×**"


def training_alone(result: dict) -> str:
    """The child's own training time, its parts, and when the engine took the last text (its counting pass)."""
    alone = f"{result['train']:.1f} s"
    notes = []
    if "learn" in result:
        notes.append(f"{result['learn']:.1f} s rustbpe + {result['convert']:.1f} s conversion")
    if "merges" in result:
        notes.append(f"merges learned in {result['merges']:.1f} s ({result['merges_cpu']:.2f} s CPU)")
    if "stream" in result:
        notes.append(f"last text taken at {result['stream']:.1f} s")
    return alone + (f" ({'; '.join(notes)})" if notes else "")


def row(label: str, engine: str, result: dict, base: dict | None, against: str) -> str:
    """One row of the running table: the engine's figures and their ratios to bare tokenizers'."""
    return (f"| {label} | {engine} | {result['wall']:.1f} s | {result['peak_kib'] / 1024:.0f} MiB | "
            f"{ratios(result, base)} | {training_alone(result)} | {result['baseline_kib'] / 1024:.0f} MiB | "
            f"{result['vocab']} | {against} | {result['load']:.2f} |")


def markdown_table(results: list[dict]) -> str:
    """The full table as BENCHMARKS.md holds it: engine x corpus size x wall x peak RSS x ratios to bare."""
    lines = ["| corpus | engine | wall | peak RSS | wall vs bare | RSS vs bare | training alone | load at start |",
             "|---|---|---|---|---|---|---|---|"]
    bases = {r["mb"]: r for r in results if r["engine"] == "tokenizers files"}
    for r in results:
        engine = r["engine"] + {"tokenizers files": " (bare)", "tokenizers iterator": " (today)"}.get(r["engine"], "")
        lines.append(f"| {r['label']} | {engine} | {r['wall']:.1f} s | {r['peak_kib'] / 1024:.0f} MiB | "
                     f"{ratios(r, bases.get(r['mb']))} | {training_alone(r)} | {r['load']:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, nargs="+", default=[10.0, 100.0, 500.0], help="corpus sizes, MB (10**6 bytes)")
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--markdown", type=Path, help="also write the final Markdown table (and load averages) here")
    parser.add_argument("--json", type=Path, help="also write every measured figure here, as JSON")
    parser.add_argument("--mix", action="store_true",
                        help="half English, a quarter code, a quarter other languages (instead of every source alike)")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.corpus, args.vocab, args.output)
        return
    from tests.text import flores_lines

    held_out = flores_lines(200, 0, ("eng_Latn", "deu_Latn", "rus_Cyrl", "zho_Hans", "jpn_Jpan", "spa_Latn"))
    work = Path(tempfile.mkdtemp(prefix="tm-train-speed-"))
    start_load = os.getloadavg()
    print(f"{os.cpu_count()} cores, load average {start_load[0]:.2f} at start, vocab {args.vocab}, gpt2 regex")
    print("| corpus | engine | wall | peak RSS | vs bare tokenizers: wall | peak RSS | training alone "
          "| RSS after imports | vocab | against bare tokenizers' vocabulary | load at start |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    try:
        for size in args.mb:
            corpus = work / f"corpus-{size:g}.txt"
            corpus_file(corpus, int(size * MB), args.mix)
            label = f"{corpus.stat().st_size / MB:.1f} MB" + (" mix" if args.mix else "")
            reference, base = work / f"tokenizers-files-{size:g}.json", None
            for engine in args.engines:
                output = work / f"{engine.replace(' ', '-')}-{size:g}.json"
                load = os.getloadavg()[0]
                result = run(engine, corpus, args.vocab, output)
                result.update(engine=engine, mb=size, label=label, bytes=corpus.stat().st_size, load=load)
                if engine == "tokenizers files":
                    base = result
                against = compare(reference, output, held_out) if base and base is not result else "–"
                result["against"] = against
                results.append(result)
                print(row(label, engine, result, base, against), flush=True)
            corpus.unlink()
        end_load = os.getloadavg()
        loads = (f"load average (1, 5, 15 min) {', '.join(f'{x:.2f}' for x in start_load)} at the start, "
                 f"{', '.join(f'{x:.2f}' for x in end_load)} at the end; {os.cpu_count()} cores")
        table = markdown_table(results)
        print(f"\n{loads}\n\n{table}")
        if args.markdown:
            args.markdown.write_text(f"{loads}\n\n{table}\n")
        if args.json:
            args.json.write_text(json.dumps({"start_load": start_load, "end_load": end_load, "vocab": args.vocab,
                                             "results": results}, indent=2))
    finally:
        shutil.rmtree(work)

if __name__ == "__main__":
    main()
