"""The small fixed texts of the cost report, and what their pieces say about a tokenizer.

The first seed article's "what the choice costs you" shows each cost on a handful of texts:
how numbers are cut (1000 → 100·0, 1999 → 199·9), what indentation costs before
`return x`, the extra token of a trailing space, and words reaching the model in pieces
(strawberry → str·aw·berry). `probe` runs them all through one tokenizer, given as a
function from a text to its tokens' character spans (a piece is the substring a token
covers), and returns the numbers the report shows; `digit_pattern` and `grouping_consistency` are the arithmetic behind the
"consistency of digit grouping" figure.

Deliberately not handled: encoding (the caller's function does it, in a sandbox for a
version's own regex), and numbers in context: each probe number is encoded alone, at the
start of a text, so that no neighbouring space or word joins its pieces.
"""

import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

Spans = Callable[[str], list[tuple[int, int]]]

NUMBERS = ("1000", "10000", "100000", "1999", "19999", "2026", "in 1999", "in 2024", "$19.99", "1,299.00 €")
INDENTS = (("4 spaces", "    return x"), ("8 spaces", "        return x"), ("12 spaces", "            return x"),
           ("a tab", "\treturn x"))
UNINDENTED = "return x"
TRAILING = ("El niño juega en el", "El niño juega en el ")
WORDS = ("strawberry", "ferrocarril", "criptomoneda", "programación", "jardín", "tokenization", "unbelievable",
         "photosynthesis", "internationalization", "Straßenbahn", "Geschwindigkeit", "développement",
         "железнодорожный", "SolidGoldMagikarp")
CARRIER = "the "  # words are cut as inside a sentence: after a word and a space
GROUPING_LENGTHS = range(2, 8)  # digits of the numbers whose split patterns are compared
GROUPING_PER_LENGTH = 12


def grouping_numbers() -> dict[int, list[str]]:
    """For each length, the same numbers every time: 10…0, 19…9, 99…9 and nine drawn with a fixed seed."""
    numbers = {}
    for length in GROUPING_LENGTHS:
        draw = random.Random(length)
        fixed = [str(10 ** (length - 1)), "1" + "9" * (length - 1), "9" * length]
        drawn = [str(draw.randrange(10 ** (length - 1), 10**length)) for _ in range(GROUPING_PER_LENGTH - len(fixed))]
        numbers[length] = fixed + drawn
    return numbers


def digit_pattern(pieces: Sequence[str]) -> tuple[int, ...]:
    """How many digits each piece holds, pieces without digits left out: 1999 → 199·9 is (3, 1)."""
    counts = (sum(ch.isdigit() for ch in piece) for piece in pieces)
    return tuple(count for count in counts if count)


def pattern_label(pattern: Sequence[int]) -> str:
    return "+".join(map(str, pattern)) or "–"


def grouping_consistency(patterns: dict[int, list[tuple[int, ...]]]) -> dict[str, Any]:
    """How uniformly numbers of each length are cut: per length, its most common pattern and the
    share of numbers cut that way; overall, that share over all numbers (1.0: every length has one
    pattern, so a digit's place in its piece says where it sits in the number)."""
    lengths, following, total = [], 0, 0
    for length, seen in sorted(patterns.items()):
        if not seen:
            continue
        counts = Counter(seen)
        pattern, count = counts.most_common(1)[0]
        lengths.append({"digits": length, "pattern": pattern_label(pattern), "share": count / len(seen),
                        "patterns": len(counts), "numbers": len(seen)})
        following += count
        total += len(seen)
    return {"consistency": following / total if total else 0.0, "lengths": lengths}


def _cut(spans: Spans, text: str) -> dict[str, Any]:
    pieces = [text[start:end] for start, end in spans(text)]
    return {"text": text, "pieces": pieces, "tokens": len(pieces)}


def word_pieces(spans: Spans, word: str) -> dict[str, Any]:
    """The pieces of a word inside a sentence: the tokens of "the WORD" that overlap the word
    (with the space in front, for tokenizers that glue it on)."""
    text = CARRIER + word
    start = len(CARRIER)
    pieces = [text[s:e] for s, e in spans(text) if s < len(text) and e > start]
    return {"text": word, "pieces": pieces, "tokens": len(pieces)}


def probe(spans: Spans) -> dict[str, Any]:
    """Every fixed text of the report through one tokenizer (see the module docstring)."""
    def pieces(text: str) -> list[str]:
        return [text[start:end] for start, end in spans(text)]

    numbers = [_cut(spans, text) for text in NUMBERS]
    patterns = {length: [digit_pattern(pieces(n)) for n in group] for length, group in grouping_numbers().items()}
    bare = len(spans(UNINDENTED))
    indentation = [{**_cut(spans, text), "label": label} for label, text in INDENTS]
    for row in indentation:
        row["indent_tokens"] = row["tokens"] - bare  # what the whitespace costs on top of the line
    without, with_space = (_cut(spans, text) for text in TRAILING)
    words = [word_pieces(spans, word) for word in WORDS]
    return {
        "numbers": numbers,
        "digit_grouping": grouping_consistency(patterns),
        "indentation": indentation,
        "trailing_space": {"without": without, "with": with_space,
                           "extra_tokens": with_space["tokens"] - without["tokens"],
                           "last_piece": with_space["pieces"][-1] if with_space["pieces"] else ""},
        "words": words,
        "split_share": sum(w["tokens"] > 1 for w in words) / len(words),
    }
