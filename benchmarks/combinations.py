"""Every supported combination on the same corpus: files produced, lossless round trip, training time.

Trains in-process through the service's own code (trainer → export), on FLORES lines in
seven scripts, then checks decode(encode(x)) == x on the torture text of the tests.

    .venv/bin/python -m benchmarks.combinations [--lines 1000]
"""

import argparse
import time

from tests.combinations import COMBINATIONS, LANGUAGES, TORTURE
from tests.services import CORPORA
from tokenizers import Tokenizer
from tokenmill import training
from tokenmill.export import artifact_files
from tokenmill.sentencepiece_training import train_sentencepiece
from tokenmill.spec import resolve_spec


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1000, help="lines per language")
    args = parser.parse_args()
    texts = []
    for language in LANGUAGES:
        texts += (CORPORA / "parallel_flores200_dev" / f"{language}.txt").read_text().splitlines()[: args.lines]
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(f"corpus: {len(texts)} lines, {megabytes:.1f} MB, {len(LANGUAGES)} languages")
    print("| combination | spec | files | lossless round trip | training time |")
    print("|---|---|---|---|---|")
    for combination in COMBINATIONS:
        spec = resolve_spec(combination.spec)
        started = time.perf_counter()
        if spec.library == "sentencepiece":
            result = train_sentencepiece(spec, texts)
            tokenizer = Tokenizer.from_str(result.tokenizer_json)
            files = {"tokenizer.model": b"", "tokenizer.vocab": b""}
        else:
            tokenizer, files = training.train(spec, texts), {}
        seconds = time.perf_counter() - started
        exported, _ = artifact_files(spec, tokenizer)
        names = sorted({*exported, *files, "manifest.json"})
        lossless = sum(tokenizer.decode(tokenizer.encode(t, add_special_tokens=False).ids) == t for t in TORTURE)
        shown = {k: v for k, v in combination.spec.items()}
        print(f"| {combination.name} | `{shown}` | {', '.join(names)} | {lossless}/{len(TORTURE)} | {seconds:.2f} s |",
              flush=True)


if __name__ == "__main__":
    main()
