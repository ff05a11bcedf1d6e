"""What the compiled splitter knows of each code point: a 16-bit class, read off Python's `regex`.

Each bit of a class says whether `regex` (the version this project pins, with its own Unicode
database: Unicode 17 in 2026.11.19, where Python 3.11's `unicodedata` has 14.0) matches the
code point with one character class of the presets' patterns (`BITS`), and bits 10-13 say which
letter of the contractions ('s 'd 'm 't 'll 've 're) the code point matches case-insensitively,
as `(?i:s)` does ("ſ" is an s). So the splitter and `regex.findall` agree by construction, down
to which spaces `\\s` takes (not U+001C-U+001F, which `str.isspace` takes).

The classes are generated (`python -m tokenmill.training.splitting.classes --write`) into
`classes_data.py` as runs of code points with the same class, with the `regex` version they
were read from; loading them under another version raises, so an upgrade of `regex` regenerates
them (the command above) and runs the equality tests, never silently splits by stale classes.
"""

import argparse
import hashlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import regex

UNICODE = 0x110000
BLOCK = 256  # the table is two-level: code point >> 8 picks a block of 256 classes

# The character classes of the three presets' patterns, one bit each.
LETTER, NUMBER, SPACE, UPPER, LOWER, NEWLINE, BLANK, APOSTROPHE, SLASH, LITERAL = (1 << bit for bit in range(10))
BITS = {
    LETTER: r"\p{L}",
    NUMBER: r"\p{N}",
    SPACE: r"\s",
    UPPER: r"[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]",  # o200k's first letter class
    LOWER: r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]",  # o200k's second letter class
    NEWLINE: r"[\r\n]",
    BLANK: " ",
    APOSTROPHE: "'",
    SLASH: "/",
    LITERAL: "[sdmtlvre]",  # the contraction letters as written: gpt2's are case-sensitive
}
# The letters of the contractions, numbered 1-8 in bits 10-13: the code points `(?i:x)` matches.
FOLDED = "sdmtlvre"
FOLD_SHIFT = 10
FOLD_S, FOLD_D, FOLD_M, FOLD_T, FOLD_L, FOLD_V, FOLD_R, FOLD_E = range(1, 9)
FOLD_MASK = 0xF << FOLD_SHIFT

HERE = Path(__file__).resolve().parent
DATA = HERE / "classes_data.py"


def generated() -> npt.NDArray[np.uint16]:
    """Every code point's class, read off the installed `regex` (a second or so)."""
    everything = "".join(map(chr, range(UNICODE)))  # lone surrogates too: a str may hold them
    classes = np.zeros(UNICODE, dtype=np.uint16)
    for bit, pattern in BITS.items():
        for found in regex.finditer(f"(?:{pattern})+", everything):
            classes[found.start():found.end()] |= bit
    for number, letter in enumerate(FOLDED, 1):
        for found in regex.finditer(f"(?i:{letter})+", everything):
            classes[found.start():found.end()] |= number << FOLD_SHIFT
    _check(classes)
    return classes


def _check(classes: npt.NDArray[np.uint16]) -> None:
    # What the scanners take for granted (tokenmill.training.splitting.scanner): letters,
    # numbers and spaces are apart, the literal characters are spaces or "other", and o200k's
    # letter classes are the letters and the marks.
    def having(bit: int) -> npt.NDArray[np.bool_]:
        found: npt.NDArray[np.bool_] = (classes & bit) != 0
        return found

    for one, other in ((LETTER, NUMBER), (LETTER, SPACE), (NUMBER, SPACE)):
        if np.any(having(one) & having(other)):
            raise RuntimeError(f"regex {regex.__version__}: a code point is both {BITS[one]} and {BITS[other]}")
    if not (np.all(having(SPACE)[[0x0A, 0x0D, 0x20]]) and not np.any(having(LETTER | NUMBER | SPACE)[[0x27, 0x2F]])):
        raise RuntimeError(f"regex {regex.__version__}: \\r, \\n or space is not \\s, or ' or / is not punctuation")
    letters_or_marks = having(UPPER) | having(LOWER)
    if np.any(having(LETTER) & ~letters_or_marks):
        raise RuntimeError(f"regex {regex.__version__}: a letter in neither of o200k's letter classes")


def runs(classes: npt.NDArray[np.uint16]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint16]]:
    """The first code point of each run of equal classes, and the run's class."""
    starts = np.concatenate([[0], np.flatnonzero(np.diff(classes.astype(np.int32))) + 1]).astype(np.int64)
    return starts, classes[starts]


def table() -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint16]]:
    """The committed classes as the scanner reads them: each block's row (code point >> 8), and
    the distinct rows of 256 classes. Raises when `regex` is not the version they came from."""
    from tokenmill.training.splitting import classes_data

    if regex.__version__ != classes_data.REGEX_VERSION:
        raise RuntimeError(f"the splitter's Unicode classes were read off regex {classes_data.REGEX_VERSION}, not "
                           f"the installed {regex.__version__}: regenerate them (python -m "
                           "tokenmill.training.splitting.classes --write) and run tests/unit/test_splitter.py")
    starts = np.array(classes_data.RUNS[0::2], dtype=np.int64)
    values = np.array(classes_data.RUNS[1::2], dtype=np.uint16)
    classes = np.repeat(values, np.diff(np.append(starts, UNICODE)))
    if hashlib.sha256(classes.tobytes()).hexdigest() != classes_data.SHA256:
        raise RuntimeError("classes_data.py does not hold the classes it was generated with (edited by hand?)")
    blocks = classes.reshape(-1, BLOCK)
    numbers: dict[bytes, int] = {}  # each distinct row's number, as first seen (np.unique by rows takes 0.17 s)
    index = np.fromiter((numbers.setdefault(block.tobytes(), len(numbers)) for block in blocks), dtype=np.int32,
                        count=len(blocks))
    firsts = np.unique(index, return_index=True)[1]  # the first block of each row
    return index, np.ascontiguousarray(blocks[firsts])


def source(classes: npt.NDArray[np.uint16]) -> str:
    """classes_data.py's text for these classes."""
    starts, values = runs(classes)
    pairs = [f"0x{start:X}, 0x{value:X}," for start, value in zip(starts.tolist(), values.tolist())]
    lines = [" ".join(pairs[at:at + 6]) for at in range(0, len(pairs), 6)]
    body = "\n".join(f"    {line}" for line in lines)
    return ('"""Generated by `python -m tokenmill.training.splitting.classes --write` from regex '
            f'{regex.__version__}:\ndo not edit. Each code point\'s class (tokenmill.training.splitting.classes), as runs: the first\n'
            'code point of a run, then the class of every code point up to the next run."""\n\n'
            f'REGEX_VERSION = "{regex.__version__}"\n'
            "# sha256 of the classes of all 0x110000 code points (uint16, little-endian)\n"
            f'SHA256 = "{hashlib.sha256(classes.tobytes()).hexdigest()}"\n'
            f"RUNS = (\n{body}\n)\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="Generate (or check) the splitter's Unicode classes from regex.")
    parser.add_argument("--write", action="store_true", help=f"write {DATA.name}; without it, only check it")
    args = parser.parse_args()
    text = source(generated())
    if args.write:
        DATA.write_text(text)
        print(f"wrote {DATA} (regex {regex.__version__})")
    elif DATA.read_text() != text:
        raise SystemExit(f"{DATA} is not what regex {regex.__version__} gives: run with --write")
    else:
        print(f"{DATA.name} is what regex {regex.__version__} gives")


if __name__ == "__main__":
    main()
