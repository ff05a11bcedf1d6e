"""Every supported combination on the same corpus: files produced, lossless round trip, training time.

Trains in-process through the service's own code (trainer → export), on FLORES lines in
seven scripts, then checks decode(encode(x)) == x on the torture text of the tests.

    .venv/bin/python -m benchmarks.combinations [--lines 1000]
"""

import argparse
import time

from tests.combinations import COMBINATIONS, LANGUAGES, TORTURE
from tests.text import flores_lines
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import train_tokenizer, version_contents


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1000, help="lines per language")
    args = parser.parse_args()
    texts = flores_lines(args.lines, 0, tuple(LANGUAGES))
    megabytes = sum(len(t.encode()) for t in texts) / 1e6
    print(f"corpus: {len(texts)} lines, {megabytes:.1f} MB, {len(LANGUAGES)} languages")
    print("| combination | spec | files | lossless round trip | training time |")
    print("|---|---|---|---|---|")
    for combination in COMBINATIONS:
        spec = resolve_spec(combination.spec)
        started = time.perf_counter()
        tokenizer, extra = train_tokenizer(spec, texts)
        seconds = time.perf_counter() - started
        names = sorted(version_contents(spec, tokenizer, extra, {}))
        lossless = sum(tokenizer.decode(tokenizer.encode(t, add_special_tokens=False).ids) == t for t in TORTURE)
        shown = dict(combination.spec.items())
        print(f"| {combination.name} | `{shown}` | {', '.join(names)} | {lossless}/{len(TORTURE)} | {seconds:.2f} s |",
              flush=True)


if __name__ == "__main__":
    main()
