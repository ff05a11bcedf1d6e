"""SuperBPE against plain BPE at the same vocabulary (issue 21, item 3).

Builds the corpus of each --mb from /work/shared/corpora as benchmarks.train_speed does, keeps
its last --held-out-mb out of training, stores the rest in a local store (a folder), and trains
with `library: tokenmill` in a fresh process per run (so each peak is its own), as a job does
(`train_version_files`, or `superword_files` for SuperBPE):

- `plain`: byte-level BPE of --vocab tokens, gpt2 regex;
- `superword`: the same vocabulary, merges up to --transition × vocab as plain BPE (stage 1),
  then merges across whitespace (stage 2: spans between punctuation and newlines, counted by
  the counting children, those seen once dropped, segmented by stage 1, merges learned after).

For each: wall time of each stage, peak RSS of the process and its counting children, and the
held-out text's bytes per token (SuperBPE's point: fewer tokens for the same text). Past about
106 MB the corpus repeats its files, so the held-out text is in the training text too.

    .venv/bin/python -m benchmarks.superword --mb 100 --vocab 32000 64000
"""

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks import child_runs
from benchmarks.train_speed import corpus_with_held_out, high_water_kib, tree_peak_kib

KEY = "corpora/bench/corpus"


def child(root: Path, kind: str, vocab: int, transition: float, held_out: str, cap_mib: int) -> dict:
    from tokenizers import Tokenizer

    from tokenmill.jobs.extension import superword_files
    from tokenmill.models import Corpus
    from tokenmill.store import LocalStore
    from tokenmill.training.counting.merge import learner_budget
    from tokenmill.training.spec import resolve_spec
    from tokenmill.training.version_files import train_version_files

    store = LocalStore(root)
    size = (root / KEY).stat().st_size
    corpus = Corpus(id=uuid.uuid4(), name="bench", language="mul", domain="mixed", storage_key=KEY, bytes=size,
                    characters=size, format="text", text_field=None)
    marks: dict[str, float] = {}
    started = time.monotonic()

    def report(stage: str, done: float, force: bool = False) -> None:
        marks.setdefault(stage, time.monotonic() - started)

    raw = {"library": "tokenmill", "vocab_size": vocab}
    lineage: dict = {}
    if kind == "superword":
        raw["superword"] = {"transition_vocab_size": int(transition * vocab)}
        files = superword_files(resolve_spec(raw), store, [corpus], report, lineage, regex_seconds=10.0,
                                budget=learner_budget(cap_mib * 2**20 if cap_mib else None))
    else:
        files = train_version_files(resolve_spec(raw), store, [corpus], report, {})
    seconds = time.monotonic() - started
    tokenizer = Tokenizer.from_str(files.files["tokenizer.json"].decode())
    text = Path(held_out).read_text(encoding="utf-8")
    tokens = sum(len(encoding.ids) for encoding in tokenizer.encode_batch(text.splitlines()))
    return {"seconds": seconds, "stage1": marks.get("counting spans", seconds), "vocab": files.vocab_size,
            "bytes_per_token": len(text.encode()) / max(tokens, 1), "pruned": lineage.get("pruned")}


def run(*args: str) -> dict:
    process = child_runs.start("benchmarks.superword", *args)
    tree = tree_peak_kib(process)
    result = child_runs.result(process)
    result["peak_mib"] = max(tree, result["peak_kib"]) / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, nargs="+", default=[100.0])
    parser.add_argument("--vocab", type=int, nargs="+", default=[32000, 64000])
    parser.add_argument("--transition", type=float, default=0.8, help="stage 1's share of the vocabulary")
    parser.add_argument("--held-out-mb", type=float, default=2)
    parser.add_argument("--cap-mib", type=int, nargs="*", default=[],
                        help="SuperBPE again with the spans kept within a job's memory cap of this many MiB")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        root, kind, vocab, transition, held_out, cap_mib = args.child
        out = child(Path(root), kind, int(vocab), float(transition), held_out, int(cap_mib))
        out["peak_kib"] = high_water_kib()
        print(json.dumps(out))
        return
    print("| corpus | vocab | kind | stage 1 s | stage 2 s | wall s | peak RSS MiB | held-out bytes/token | tokens vs plain "
          "| spans kept (threshold) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mb in args.mb:
        with tempfile.TemporaryDirectory() as folder:
            root = Path(folder)
            (root / KEY).parent.mkdir(parents=True)
            corpus_with_held_out(root / KEY, root / "held_out.txt", mb, args.held_out_mb)
            for vocab in args.vocab:
                plain = None
                for kind, cap in (("plain", 0), ("superword", 0), *(("superword", cap) for cap in args.cap_mib)):
                    out = run(folder, kind, str(vocab), str(args.transition), str(root / "held_out.txt"), str(cap))
                    plain = plain or out
                    stage2 = out["seconds"] - out["stage1"] if kind == "superword" else 0.0
                    pruned = out["pruned"]
                    kept = f"{pruned['pieces_kept']:,} ({pruned['threshold']})" if pruned else "—"
                    label = f"{kind}, cap {cap} MiB" if cap else kind
                    print(f"| {mb:g} MB | {vocab:,} | {label} | {out['stage1']:.1f} | {stage2:.1f} | {out['seconds']:.1f} | "
                          f"{out['peak_mib']:.0f} | {out['bytes_per_token']:.3f} | "
                          f"{plain['bytes_per_token'] / out['bytes_per_token']:.3f}× | {kept} |", flush=True)


if __name__ == "__main__":
    main()
