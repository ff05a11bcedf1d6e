"""Every supported (algorithm, library, byte_level, byte_fallback) combination, and what each promises.

Shared by the end-to-end test that trains them all through the worker and by the benchmark
that tabulates files, round trip and training time.
"""

from dataclasses import dataclass, field

# Text a tokenizer must survive: emoji (with modifiers and ZWJ), CJK, Arabic, Devanagari,
# combining marks, control characters, long digit runs, indentation, odd whitespace.
TORTURE = [
    "Hello, world! 👋🏽 🧑‍🤝‍🧑 🇪🇸 emoji",
    "东京和北京是大城市。日本語のテキストも、カタカナも。",
    "مرحبا بالعالم، هذا نص عربي.",
    "हिन्दी में लिखा पाठ।",
    "Combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0358\u0362 ﬁ ligature",
    "Tabs\tand\ttabs, control \x01\x02\x7f chars, nbsp\u00a0and\u200bzero-width",
    "digits 1234567890123456789012345678901234567890 and 3.14159",
    "    indented code():\n        return {'key': [1, 2, 3]}  ",
    "  leading and trailing spaces  ",
]

LANGUAGES = ["eng_Latn", "spa_Latn", "deu_Latn", "rus_Cyrl", "arb_Arab", "hin_Deva", "zho_Hans"]


@dataclass(frozen=True)
class Combination:
    name: str
    spec: dict
    files: frozenset[str]
    lossless: bool  # decode(encode(x)) == x for every TORTURE line
    extra: dict = field(default_factory=dict)


COMMON = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "manifest.json"}
BPE_FILES = COMMON | {"vocab.json", "merges.txt"}
SPM_FILES = COMMON | {"tokenizer.model", "tokenizer.vocab"}

COMBINATIONS = [
    Combination("bpe/tokenizers/byte-level gpt2", {"vocab_size": 2000, "pre_tokenizer": "gpt2"},
                frozenset(BPE_FILES | {"tokenizer.tiktoken"}), True),
    Combination("bpe/tokenizers/byte-level cl100k", {"vocab_size": 2000, "pre_tokenizer": "cl100k"},
                frozenset(BPE_FILES | {"tokenizer.tiktoken"}), True),
    Combination("bpe/tokenizers/byte-level o200k", {"vocab_size": 2000, "pre_tokenizer": "o200k"},
                frozenset(BPE_FILES | {"tokenizer.tiktoken"}), True),
    Combination("bpe/rustbpe/byte-level o200k", {"library": "rustbpe", "vocab_size": 2000, "pre_tokenizer": "o200k"},
                frozenset(BPE_FILES | {"tokenizer.tiktoken"}), True),
    Combination("bpe/tokenmill/byte-level cl100k", {"library": "tokenmill", "vocab_size": 2000, "pre_tokenizer": "cl100k"},
                frozenset(BPE_FILES | {"tokenizer.tiktoken"}), True),
    Combination("bpe/tokenizers/char metaspace + byte fallback",
                {"vocab_size": 4000, "byte_level": False, "pre_tokenizer": "metaspace", "byte_fallback": True},
                frozenset(BPE_FILES), True),
    Combination("bpe/tokenizers/char metaspace", {"vocab_size": 4000, "byte_level": False, "pre_tokenizer": "metaspace"},
                frozenset(BPE_FILES), False),
    Combination("bpe/tokenizers/char whitespace </w>",
                {"vocab_size": 4000, "byte_level": False, "pre_tokenizer": "whitespace", "end_of_word_suffix": "</w>"},
                frozenset(BPE_FILES), False),
    Combination("wordpiece/tokenizers", {"algorithm": "wordpiece", "vocab_size": 4000}, frozenset(COMMON), False),
    Combination("unigram/tokenizers", {"algorithm": "unigram", "vocab_size": 4000}, frozenset(COMMON), False),
    Combination("unigram/tokenizers + byte fallback", {"algorithm": "unigram", "vocab_size": 4000, "byte_fallback": True},
                frozenset(COMMON), True),
    Combination("unigram/sentencepiece", {"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 4000},
                frozenset(SPM_FILES), False),
    Combination("unigram/sentencepiece + byte fallback",
                {"library": "sentencepiece", "algorithm": "unigram", "vocab_size": 4000, "byte_fallback": True},
                frozenset(SPM_FILES), True),
    Combination("bpe/sentencepiece", {"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 4000},
                frozenset(SPM_FILES | {"vocab.json", "merges.txt"}), False),
    Combination("bpe/sentencepiece + byte fallback",
                {"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 4000, "byte_fallback": True},
                frozenset(SPM_FILES | {"vocab.json", "merges.txt"}), True),
]
