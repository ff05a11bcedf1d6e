"""The pre-tokenization regex presets (gpt2, cl100k, o200k): tiktoken's own split patterns.

`PATTERNS` holds the three split regexes in a form that both Oniguruma (the `tokenizers`
Split pre-tokenizer, used to train our own byte-level BPE) and tiktoken's engine read the
same way. Only cl100k needed a change: Oniguruma's Ruby syntax has no possessive interval,
so tiktoken's `\\p{N}{1,3}+` means "one or more runs of 1-3 digits" there and swallows
whole numbers; `\\p{N}{1,3}` is equivalent in tiktoken (nothing follows it in its branch)
and correct in Oniguruma.
"""

from tiktoken_ext.openai_public import r50k_pat_str

# tiktoken_ext.openai_public only exposes r50k's pattern as a module constant; the other
# two live inside its downloading constructors, so they are copied verbatim from
# tiktoken 0.14.0, long lines and all (tests/unit/test_references.py checks they still agree).
CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# Split regexes for training with `tokenizers` (Oniguruma); see the module docstring.
PATTERNS = {
    "gpt2": r50k_pat_str,
    "cl100k": CL100K_PAT_STR.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}"),
    "o200k": O200K_PAT_STR,
}

# SuperBPE's second stage (spec `superword`) reads spans between punctuation and newlines, spaces
# kept inside them; the superword version's files split text by it.
SUPERWORD_SPLIT = r"[^\r\n\p{P}\p{S}]+|[\p{P}\p{S}]+|[\r\n]+"
