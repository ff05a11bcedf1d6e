"""Evaluation throughput (MB/s) against a bare `tokenizers` encode_batch of the same tokenizer.

Trains a tokenizer per kind on real text, then, in the same run and on the same lines,
times (a) `Tokenizer.encode_batch` of the version's tokenizer.json alone, (b) for versions
sentencepiece trained, sentencepiece's own `encode(batch, num_threads=2)` alone, and (c)
Tokenmill's full evaluation (`measure`: encoding, spans, round trips and every metric) with
the engine it picks: once cold (its worker processes started for it) and then the best of
--runs with the processes kept, as in a Celery worker that has evaluated before. Each
baseline timing is the best of --runs too.

    .venv/bin/python -m benchmarks.eval_throughput [--mb 16] [--vocab 32000] [--runs 2] [--kinds sentencepiece]
"""

import argparse
import json
import time

import sentencepiece
from tokenizers import Tokenizer

from tests.services import CORPORA
from tokenmill.evaluation import shards
from tokenmill.evaluation.encoders import proven_encoder, version_encoders
from tokenmill.evaluation.measuring import PROOF_LINES, batched, measure
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import train_tokenizer, version_contents

SOURCES = ["manpages/eng_Latn.txt", "fortunes/deu_Latn.txt", "code/python.txt", "debian_reference/zho_Hans.txt",
           "fortunes/rus_Cyrl.txt", "bible/spa_Latn.txt"]
KINDS = {
    "byte-level BPE (gpt2 regex)": {},
    "char BPE + byte fallback": {"byte_level": False, "pre_tokenizer": "metaspace", "byte_fallback": True},
    "WordPiece": {"algorithm": "wordpiece"},
    "Unigram": {"algorithm": "unigram"},
    "sentencepiece Unigram + byte fallback": {"library": "sentencepiece", "algorithm": "unigram", "byte_fallback": True},
    "sentencepiece BPE + byte fallback": {"library": "sentencepiece", "algorithm": "bpe", "byte_fallback": True},
}


def text_lines(megabytes: float) -> list[str]:
    """About `megabytes` of lines, taken evenly from several domains and scripts."""
    share = int(megabytes * 1e6 / len(SOURCES))
    lines = []
    for source in SOURCES:
        size = 0
        with (CORPORA / source).open(encoding="utf-8") as handle:
            for line in handle:
                lines.append(line.rstrip("\n"))
                size += len(line.encode())
                if size >= share:
                    break
    return lines


def bare_encode_batch(tokenizer: Tokenizer, lines: list[str]) -> float:
    """`tokenizers`' own batch encode of the version's tokenizer.json (all cores): the baseline."""
    started = time.perf_counter()
    for batch in batched(lines, 1024):
        tokenizer.encode_batch(batch, add_special_tokens=False)
    return time.perf_counter() - started


def bare_sentencepiece(model: bytes, lines: list[str]) -> float:
    """sentencepiece's own batch encode (ids, both cores): the baseline for versions it trained."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    started = time.perf_counter()
    for batch in batched(lines, 1024):
        processor.encode(batch, num_threads=2)
    return time.perf_counter() - started


def timed(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def trained_files(spec, train_lines: list[str]) -> tuple[dict[str, bytes], bytes | None]:
    """A version's files, as the service exports them, and its sentencepiece model if it has one."""
    tokenizer, extra = train_tokenizer(spec, train_lines)
    return version_contents(spec, tokenizer, extra, {}), extra.get("tokenizer.model")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=float, default=16)
    parser.add_argument("--train-mb", type=float, default=6)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--runs", type=int, default=2, help="each timing is the best of this many runs")
    parser.add_argument("--kinds", default="", help="only the kinds whose name contains this text, e.g. sentencepiece")
    args = parser.parse_args()
    train_lines, lines = text_lines(args.train_mb), text_lines(args.mb)[::-1]
    megabytes = sum(len(line.encode()) for line in lines) / 1e6
    print(f"evaluation text: {megabytes:.1f} MB, {len(lines)} lines; vocab {args.vocab}")
    print("| kind | engine | tokenizers encode_batch MB/s | own library's batch encode MB/s | Tokenmill, cold MB/s "
          "| Tokenmill MB/s | ratio to encode_batch | ratio to own library |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, overrides in KINDS.items():
        if args.kinds not in kind:
            continue
        spec = resolve_spec({"vocab_size": args.vocab, **overrides})
        files, model = trained_files(spec, train_lines)
        slow, fast = version_encoders(kind, files, json.loads(files["manifest.json"]))
        encoder = proven_encoder(slow, fast, lines[:PROOF_LINES])
        tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode())
        bare = min(bare_encode_batch(tokenizer, lines) for _ in range(args.runs))
        own = min(bare_sentencepiece(model, lines) for _ in range(args.runs)) if model is not None else bare
        shards.stop()
        cold = timed(measure, encoder, lines)  # worker processes started for this one
        ours = min(timed(measure, encoder, lines) for _ in range(args.runs))
        print(f"| {kind} | {encoder.encoded_by} | {megabytes / bare:.2f} | {megabytes / own:.2f} | {megabytes / cold:.2f} "
              f"| {megabytes / ours:.2f} | {bare / ours:.2f}× | {own / ours:.2f}× |", flush=True)


if __name__ == "__main__":
    main()
