"""What bounding a custom regex's time per document costs (issue 20.3), and what `unbuildable` costs (20.6).

    .venv/bin/python -m benchmarks.regex_limit --mb 10 --rounds 3

1. Training with a custom regex (gpt2's pattern, given as `pre_tokenizer_regex`) on the first
   `--mb` MB of the shared manpages and Python corpora, on each library, with the bound
   (`REGEX_DOCUMENT_SECONDS`) and without it (`regex_seconds=None`), rounds interleaved: wall
   and CPU seconds (this process and its children), the median of the rounds, and whether the
   tokenizers are the same.
2. The longest document a corpus may hold (8 MiB, TOKENMILL_MAX_LINE_BYTES) of that text,
   split by Python's regex with the limit: how far from it an ordinary document stays.
3. `buildable.unbuildable` in a fresh process, for the default spec and 1,000 special tokens
   of 195 characters: seconds and peak RSS.
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "corpora"
SOURCES = [SHARED / "manpages" / "eng_Latn.txt", SHARED / "code" / "python.txt"]
LIBRARIES = ("tokenizers", "tokenmill", "rustbpe")
UNBUILDABLE = """
def peak_kib():  # VmHWM: ru_maxrss would carry the parent's peak over into this fresh process
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
import json, random, string, sys, time
started = time.perf_counter()
from tokenmill.training.buildable import unbuildable
imported = time.perf_counter()
raw = json.loads(sys.argv[1])
if raw.pop("long_specials", False):
    rng = random.Random(0)
    raw["special_tokens"] = ["".join(rng.choice(string.ascii_letters) for _ in range(195 - len(str(i)))) + str(i)
                             for i in range(1000)]
from tokenmill.training.spec import resolve_spec
spec = resolve_spec(raw).model_dump()
before = time.perf_counter()
found = unbuildable(spec)
print(json.dumps({"import_s": imported - started, "call_s": time.perf_counter() - before,
                  "peak_mib": peak_kib() / 1024, "field": found and found[0]}))
"""


def lines_of(megabytes: float) -> list[str]:
    lines: list[str] = []
    size = 0
    for source in SOURCES:
        for line in source.read_text(encoding="utf-8").splitlines():
            if line.strip() and size < megabytes * 1e6:
                lines.append(line)
                size += len(line.encode())
    return lines


def cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def training(library: str, lines: list[str], rounds: int) -> str:
    from tokenmill.training import with_tokenizers
    from tokenmill.training.patterns import PATTERNS
    from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.with_rustbpe import train_rustbpe
    from tokenmill.training.with_tokenmill import train_tokenmill

    spec = resolve_spec({"library": library, "pre_tokenizer": "none", "pre_tokenizer_regex": PATTERNS["gpt2"],
                         "vocab_size": 8000})
    runs: dict[float | None, list[tuple[float, float]]] = {None: [], REGEX_DOCUMENT_SECONDS: []}
    made: dict[float | None, str] = {}
    for _ in range(rounds):
        for seconds in runs:
            wall, used = time.perf_counter(), cpu()
            if library == "tokenizers":
                tokenizer = with_tokenizers.train(spec, iter(lines), regex_seconds=seconds)
            elif library == "tokenmill":
                tokenizer = train_tokenmill(spec, iter(lines), processes=2, regex_seconds=seconds)
            else:
                tokenizer = train_rustbpe(spec, iter(lines), seconds)
            runs[seconds].append((time.perf_counter() - wall, cpu() - used))
            made[seconds] = tokenizer.to_str()
    (free_wall, free_cpu), (bound_wall, bound_cpu) = (
        (statistics.median(w for w, _ in found), statistics.median(c for _, c in found)) for found in runs.values())
    return (f"| {library} | {free_wall:.2f} s / {free_cpu:.2f} s | {bound_wall:.2f} s / {bound_cpu:.2f} s | "
            f"{bound_wall / free_wall:.2f}× / {bound_cpu / free_cpu:.2f}× | {made[None] == made[REGEX_DOCUMENT_SECONDS]} |")


def longest_document(lines: list[str]) -> str:
    from tokenmill.training.counting import spills
    from tokenmill.training.patterns import PATTERNS
    from tokenmill.training.regex_limit import REGEX_DOCUMENT_SECONDS

    document = " ".join(lines)
    document = (document * (8 * 2**20 // len(document) + 1))[:8 * 2**20]
    split = spills.split_by(PATTERNS["gpt2"], None, REGEX_DOCUMENT_SECONDS)
    started = time.perf_counter()
    split(document)
    allowed = REGEX_DOCUMENT_SECONDS + len(document) / spills.CHARACTERS_PER_SECOND
    return f"one 8 MiB document split under the limit: {time.perf_counter() - started:.2f} s (allowed {allowed:.1f} s)"


def buildable_cost(raw: dict[str, object]) -> str:
    done = subprocess.run([sys.executable, "-c", UNBUILDABLE, json.dumps(raw)], capture_output=True, text=True,
                          check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return (f"| `{json.dumps(raw)}` | {found['import_s']:.2f} s | {found['call_s']:.2f} s | {found['peak_mib']:.0f} MiB "
            f"| {found['field'] or 'builds'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    lines = lines_of(args.mb)
    print(f"{len(lines)} documents, {sum(map(len, lines)) / 1e6:.1f} M characters; custom regex: gpt2's pattern\n")
    print("| library | without the bound: wall / CPU | with it | ratio | same tokenizer |")
    print("|---|---|---|---|---|")
    for library in LIBRARIES:
        print(training(library, lines, args.rounds), flush=True)
    print("\n" + longest_document(lines) + "\n")
    print("| spec | import | unbuildable | peak RSS | result |")
    print("|---|---|---|---|---|")
    for raw in ({}, {"long_specials": True}, {"library": "sentencepiece", "long_specials": True},
                {"algorithm": "unigram", "long_specials": True}):
        print(buildable_cost(raw), flush=True)


if __name__ == "__main__":
    main()
