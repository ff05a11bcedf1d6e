"""Where a split regex cuts words into pieces no merge can join again: a floor under fertility.

BPE merges only inside a pre-token. A word that the split regex cuts in four pieces costs at
least four tokens, whatever the vocabulary size. GPT-2's and cl100k's patterns match letters
as `\\p{L}+`, and the vowel signs and viramas of Devanagari (and of most scripts of India and
South-East Asia) are marks, `\\p{M}`: each one ends a run of letters and starts a pre-token of
its own, so a Hindi word is cut at every vowel sign. o200k's pattern keeps marks with letters.

`split_cuts` measures it on a sample of text (whitespace words; only the pieces holding letters
or marks count, so punctuation after a word is no cut): the share of words cut inside, the
pieces per word (the floor), the kinds of character the cuts fall before, and an example.
`corpus_cuts` does it on the first lines of a stored corpus, once per corpus and pattern.

Deliberately not handled: custom split regexes (a hostile pattern can run for minutes; these
are only measured in the sandbox, and not here), normalizers (the text is measured as stored),
and splits that are not a regex (whitespace, metaspace: they never cut inside a word).
"""

import itertools
import threading
import unicodedata
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterable
from typing import Any

import regex
from tiktoken_ext.openai_public import r50k_pat_str

from tokenmill.corpora.reading import corpus_documents
from tokenmill.models import Corpus
from tokenmill.store import ObjectStore
from tokenmill.training.patterns import CL100K_PAT_STR, O200K_PAT_STR

# The preset split regexes (a spec's pre_tokenizer), and which one each reference tokenizer uses.
PATTERNS = {"gpt2": r50k_pat_str, "cl100k": CL100K_PAT_STR, "o200k": O200K_PAT_STR}
REFERENCE_PATTERNS = {"gpt2": "gpt2", "cl100k_base": "cl100k", "o200k_base": "o200k"}
SAMPLE_LINES = 200
SAMPLE_CHARACTERS = 50_000
NOTABLE = 0.2  # a split that cuts at least this share of a language's words is worth a note
CUT_AT = {"M": "at combining marks (vowel signs, viramas)", "L": "between letters"}
_KEPT = 64
_CACHE: OrderedDict[tuple[uuid.UUID, str, str], dict[str, Any]] = OrderedDict()
_LOCK = threading.Lock()


def split_cuts(pattern: str, texts: Iterable[str]) -> dict[str, Any]:
    """How a split regex cuts the whitespace words of `texts` between two letters or marks:
    {"words", "cut_share", "pieces_per_word" (the floor), "cut_at" (where the cuts fall, most
    frequent first), "example" (a cut word and its pieces, or None)}.

    A cut beside punctuation ("U.S.", "km/h", a Chinese sentence's commas) is no cut inside a
    word: the pieces counted are those holding a letter or a mark, and a cut counts only where
    a letter or mark ends one piece and another starts the next."""
    compiled = regex.compile(pattern)
    words = cut = pieces = 0
    at: Counter[str] = Counter()
    example: dict[str, Any] | None = None
    for text in texts:
        for word in text.split():
            spans = [m.span() for m in compiled.finditer(word) if any(_kind(ch) in "LM" for ch in m.group())]
            if not spans:
                continue
            inside = [start for start, _ in spans[1:] if _kind(word[start - 1]) in "LM" and _kind(word[start]) in "LM"]
            words += 1
            pieces += 1 + len(inside)
            if inside:
                cut += 1
                at.update("M" if "M" in (_kind(word[i - 1]), _kind(word[i])) else "L" for i in inside)
                if example is None or (len(inside) > len(example["pieces"]) - 1 and len(word) <= 12):
                    bounds = [0, *inside, len(word)]
                    example = {"word": word, "pieces": [word[a:b] for a, b in itertools.pairwise(bounds)]}
    return {"words": words, "cut_share": cut / words if words else 0.0,
            "pieces_per_word": pieces / words if words else 0.0,
            "cut_at": [CUT_AT[kind] for kind, _ in at.most_common()], "example": example}


def _kind(character: str) -> str:
    """L (letter), M (mark), N, P, S, Z or C: the first letter of its Unicode category."""
    return unicodedata.category(character)[0]


def corpus_sample(store: ObjectStore, corpus: Corpus) -> list[str]:
    """The first SAMPLE_LINES documents of a corpus, at most SAMPLE_CHARACTERS in all."""
    texts, total = [], 0
    for text in itertools.islice(corpus_documents(store, corpus), SAMPLE_LINES):
        texts.append(text[: SAMPLE_CHARACTERS - total])
        total += len(texts[-1])
        if total >= SAMPLE_CHARACTERS:
            break
    return texts


def corpus_cuts(store: ObjectStore, corpus: Corpus, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`split_cuts` of each preset pattern named (gpt2, cl100k, o200k) on a corpus's first lines,
    kept per corpus (corpora never change) so that a page reloaded in a loop reads it once."""
    wanted = [name for name in dict.fromkeys(names) if name in PATTERNS]
    out: dict[str, dict[str, Any]] = {}
    sample: list[str] | None = None
    for name in wanted:
        key = (corpus.id, corpus.sha256, name)
        with _LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                out[name] = _CACHE[key]
                continue
        sample = corpus_sample(store, corpus) if sample is None else sample
        out[name] = split_cuts(PATTERNS[name], sample)
        with _LOCK:
            _CACHE[key] = out[name]
            while len(_CACHE) > _KEPT:
                _CACHE.popitem(last=False)
    return out


def is_notable(cuts: dict[str, Any]) -> bool:
    """Whether the split cuts enough words inside to set a floor worth telling."""
    return bool(cuts["words"] >= 20 and cuts["cut_share"] >= NOTABLE)
