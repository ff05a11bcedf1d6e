"""Texts made to make one pre-tokenization regex backtrack, derived from the pattern itself.

Catastrophic backtracking needs a long run of what a repeated group matches, followed by
something that makes the match fail at its end: `(b+)+c` on `"b" * 3000 + "!"`. So each
character the pattern names (a literal, an escape such as `\\s`, a property such as `\\p{L}`,
a member listed in a class), each run of literals in it (`ab` in `(ab|a)*c`) and a few common
characters are repeated a few thousand times, then followed in turn by characters that
end most matches, then by every character the pattern names (see `probe_texts`).

Deliberately not handled: a full parse of Oniguruma's syntax (the scan only collects
candidates, and extra candidates cost only time), runs that alternate two classes, and
patterns whose slow inputs need structure beyond one repeated piece; the sandbox's time
limit on every encode is the backstop for those.
"""

import re

ESCAPES = {"s": " ", "S": "a", "d": "1", "D": "a", "w": "a", "W": "!", "h": "a", "H": "!", "n": "\n", "r": "\r",
           "t": "\t", "f": "\f", "v": "\v", "R": "\n", "X": "a", "N": "a", "O": "a", "b": "", "B": "", "A": "",
           "z": "", "Z": "", "G": "", "K": ""}
# A member of each Unicode property a split regex is likely to name (general categories, scripts).
PROPERTIES = {"L": "a", "Lu": "A", "Ll": "a", "Lt": "ǅ", "Lm": "ʰ", "Lo": "中", "M": "\u0301", "Mn": "\u0301",
              "Mc": "\u0903", "Me": "\u20dd", "N": "1", "Nd": "1", "Nl": "Ⅻ", "No": "½", "P": "!", "Pc": "_",
              "Pd": "-", "Ps": "(", "Pe": ")", "Po": "!", "S": "$", "Sm": "+", "Sc": "$", "Sk": "^", "So": "©",
              "Z": " ", "Zs": " ", "C": "\x01", "Cc": "\x01", "Han": "中", "Hiragana": "あ", "Katakana": "ア",
              "Latin": "a", "Greek": "α", "Cyrillic": "я", "Arabic": "ب", "Hebrew": "א", "Devanagari": "क",
              "Thai": "ก", "Hangul": "한", "Alpha": "a", "Digit": "1", "Space": " ", "Punct": "!", "Word": "a",
              "Alnum": "a", "Upper": "A", "Lower": "a", "Emoji": "😀"}
COMMON = ("a", "A", " ", "1", "\n", "\t", "!", "'", ".", "é", "中", "😀", "_")
BREAKERS = ("!", " ", "a", "\n", "\x00")  # one of these ends the match of nearly any repeated piece
META = set("\\()[]{}|*+?^$.")
GROUP_SYNTAX = re.compile(r"\?(?:[a-zA-Z-]*[:)]|[=!>]|<[=!]|P?<\w+>)")  # between "(" and a group's content
MAX_PIECES = 64  # pieces derived from the pattern (a 2,000-character class is not 2,000 probes)


def _escape(pattern: str, at: int) -> tuple[str, int]:
    """A character the escape at `pattern[at]` (a backslash) stands for, and where it ends."""
    letter = pattern[at + 1: at + 2]
    if letter in ("p", "P") and pattern[at + 2: at + 3] == "{":
        end = pattern.find("}", at)
        end = len(pattern) - 1 if end < 0 else end
        name = pattern[at + 3: end].lstrip("^").replace("_", "")
        return PROPERTIES.get(name, PROPERTIES.get(name[:1], "")), end + 1
    if letter in ("x", "u") and pattern[at + 2: at + 3] != "{":
        digits = pattern[at + 2: at + (4 if letter == "x" else 6)]
        try:
            return chr(int(digits, 16)), at + 2 + len(digits)
        except ValueError:
            return "", at + 2
    return ESCAPES.get(letter, letter), at + 2


def pieces(pattern: str) -> list[str]:
    """What a repeated group of the pattern may match: the characters it names (in classes
    too) and its runs of plain literals."""
    found: dict[str, None] = {}
    run, in_class, at = "", False, 0
    while at < len(pattern):
        char = pattern[at]
        if char == "\\":
            # An escaped character (`\.`) is a literal; a class escape (`\s`, `\p{L}`) is not.
            literal = not in_class and pattern[at + 1: at + 2] not in ESCAPES and pattern[at + 1: at + 2] not in "pPxu"
            char, at = _escape(pattern, at)
        else:
            at += 1
            if char == "(" and (syntax := GROUP_SYNTAX.match(pattern, at)):  # "(?:", "(?i:", "(?<!" …
                at = syntax.end()
            literal = char not in META and not in_class
            if char == "[" and not in_class:
                in_class, char = True, ""
                if pattern[at: at + 1] == "]":  # "[]...]": a literal "]" first in the class
                    char, at = "]", at + 1
            elif char == "]" and in_class:
                in_class, char = False, ""
            elif char in META and not in_class:
                char = "a" if char == "." else ""  # syntax, except "." (anything)
        if char:
            found[char] = None
        run = run + char if literal and char else ""
        if len(run) >= 2:
            found[run[-8:]] = None  # a literal run, up to 8 characters: "ab" of "(ab|a)*c"
    return list(found)[:MAX_PIECES]


def probe_texts(pattern: str, repeat: int) -> list[str]:
    """Each piece of the pattern and each common character, repeated to about `repeat`
    characters, followed by each breaker that differs from it and then by every character
    the pattern names: engines skip a search whose required literal (the `b` of `(a|a)*b`)
    is absent, so it must be there, after the run."""
    found = pieces(pattern)
    tail = "".join(piece for piece in found if len(piece) == 1)
    texts = []
    for piece in dict.fromkeys([*found, *COMMON]):
        body = piece * max(1, repeat // len(piece))
        texts += [body + breaker + tail for breaker in BREAKERS if breaker != piece]
    return texts
