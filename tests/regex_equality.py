"""The compiled splitter against `regex.findall` with the preset's exact pattern, on whole files.

`compare(texts, preset, pattern)` splits the texts both ways and says where they first differ:
`regex` gives its pieces, the splitter where each piece ends. The pieces agree when their
lengths agree one by one and `regex`'s add up to the texts' length (findall's pieces are in
order and never overlap, so then they cover every text without a gap).

Run on every file of the shared corpora, each read whole, its lines as documents (what
training counts) and the file in slices of 65,536 characters as documents (many lines each, so
\\n and the end of a document fall everywhere), every pattern, a process per core (100 s on
2 cores at load 2, 8 minutes at load 15; the slow test in tests/unit/test_splitter.py runs the
lines of the three presets, 45 s):

    .venv/bin/python -m tests.regex_equality
    .venv/bin/python -m tests.regex_equality --modes lines --cases gpt2 cl100k o200k
"""

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import regex

from tokenmill.training.patterns import CL100K_PAT_STR, PATTERNS
from tokenmill.training.splitting import scanner
from tokenmill.training.splitting.counting import NUMBERS, decoded, encoded

# Every pattern the splitter stands for, with the preset it is split as.
CASES = {"gpt2": ("gpt2", PATTERNS["gpt2"]), "cl100k": ("cl100k", PATTERNS["cl100k"]),
         "cl100k tiktoken": ("cl100k", CL100K_PAT_STR), "o200k": ("o200k", PATTERNS["o200k"])}
SLICE = 1 << 16


@dataclass
class Compared:
    characters: int
    pieces: int
    mismatch: str | None  # the first text that differs, its pieces both ways


def compare(texts: list[str], preset: str, pattern: str) -> Compared:
    """The texts split by the splitter and by `regex.findall(pattern, ·)`."""
    data, text_chars = encoded(texts)
    classes, _ = decoded(data)
    ours = np.diff(scanner.piece_ends(classes, np.arange(len(classes) + 1), text_chars, NUMBERS[preset]), prepend=0)
    findall = regex.compile(pattern).findall
    theirs = []
    for text in texts:
        theirs.extend(map(len, findall(text)))
    characters = int(text_chars.sum())
    if len(theirs) == len(ours) and sum(theirs) == characters and np.array_equal(ours, theirs):
        return Compared(characters, len(ours), None)
    return Compared(characters, len(ours), _first_difference(texts, preset, pattern))


def _first_difference(texts: list[str], preset: str, pattern: str) -> str:
    from tokenmill.training.splitting.counting import split_all

    for text, pieces in zip(texts, split_all(texts, preset)):
        if pieces != regex.findall(pattern, text):
            return f"{text[:200]!r}: {pieces[:40]} against {regex.findall(pattern, text)[:40]}"
    return "the texts agree one by one but not all together"


def slices(text: str, size: int = SLICE) -> list[str]:
    """The text in pieces of `size` characters."""
    return [text[at:at + size] for at in range(0, len(text), size)]


MODES = {"lines": lambda text: text.split("\n"), "slices": slices}


def check_file(path: Path, modes: tuple[str, ...] = tuple(MODES), cases: tuple[str, ...] = tuple(CASES)
               ) -> list[tuple[str, str, Compared]]:
    """The cases on one file, read whole: as its lines, then as its slices."""
    text = path.read_text(encoding="utf-8")
    return [(mode, case, compare(MODES[mode](text), *CASES[case])) for mode in modes for case in cases]


def files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.txt"))


def main() -> None:
    from tests.services import CORPORA

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=CORPORA)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    args = parser.parse_args()
    found = files(args.root)
    started = time.perf_counter()
    characters = pieces = failures = 0
    check = partial(check_file, modes=tuple(args.modes), cases=tuple(args.cases))
    with ProcessPoolExecutor(args.processes) as pool:
        for path, results in zip(found, pool.map(check, found)):
            for mode, case, compared in results:
                characters += compared.characters
                pieces += compared.pieces
                if compared.mismatch is not None:
                    failures += 1
                    print(f"{path} ({mode}, {case}): {compared.mismatch}")
    print(f"{len(found)} files, {characters:,} characters and {pieces:,} pieces compared "
          f"({', '.join(args.cases)}; {' and '.join(args.modes)}) in {time.perf_counter() - started:.0f} s: "
          f"{failures} differ")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
