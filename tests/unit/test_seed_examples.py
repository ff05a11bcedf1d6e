"""The worked BPE examples of the seed articles, reproduced through the service's own code.

Every tokenizer here comes from `resolve_spec` + `training.train`, exactly what a worker
runs; nothing re-implements BPE. The expected merges and encodings are written out by hand
from the articles (/work/shared/seeds/000_*, 003_*, 004_*).

Two ways of writing the end-of-word marker, and why both are tested:

* The articles' code treats the marker as a symbol of its own: "sun" is
  ("s", "u", "n", "_") and "niño" is ("n", "i", "ñ", "o", "</w>"), so ("a", "</w>") and
  ("ny", "_") are merges like any other. The service reproduces that exactly when the marker
  is an ordinary character of the text: "sun_" stays one word under the whitespace
  pre-tokenizer ("_" is a word character) and "_" becomes one more letter of the alphabet.
  Article 003 already uses "_"; for 000 and 004 "_" stands in for "</w>" (a single character
  is needed, since the initial alphabet is made of characters).
* The service's `end_of_word_suffix` option is the original subword-nmt convention: the
  suffix is glued to the word's LAST CHARACTER ("sun" -> "s", "u", "n</w>"), so "n" at the end
  of a word and "n" inside it are different symbols and a lone marker never exists. That
  changes the pair counts, not only the tie-breaking, so the articles' merge lists cannot
  come out of it; the `*_suffix_*` tests pin what the option does on the same corpora.

Ties: the articles' code takes the first maximal pair in insertion order ("the first one
seen wins"). The tokenizers BPE trainer takes the pair whose ids are smallest, and the
initial alphabet gets its ids sorted by code point ("_" < "a" < ... < "z" < "í" < "ñ" < "ó"),
merged tokens in the order they are learned. Where that picks a different pair the test pins
the library and quotes the article's order next to it.

`min_frequency` stops training at the first best pair whose count is below it, which lets
the tests check the articles' pair counts "(x18)", "9" ... through the trainer itself.
"""

import json

from tokenizers import Tokenizer

from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_tokenizers import train

UNK = "<unk>"  # added by the trainer for character-level BPE; takes one vocabulary slot
MARK = "_"


def _train(text: str, *, vocab_size: int, min_frequency: int = 1, end_of_word_suffix: str | None = None) -> Tokenizer:
    raw = {
        "algorithm": "bpe",
        "byte_level": False,
        "pre_tokenizer": "whitespace",
        "min_frequency": min_frequency,
        "special_tokens": [],
        "vocab_size": vocab_size,
    }
    if end_of_word_suffix is not None:
        raw["end_of_word_suffix"] = end_of_word_suffix
    return train(resolve_spec(raw), [text])


def _merges(tokenizer: Tokenizer) -> list[tuple[str, str]]:
    merges = json.loads(tokenizer.to_str())["model"]["merges"]
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges]


def _tokens(tokenizer: Tokenizer, word: str) -> list[str]:
    return tokenizer.encode(word).tokens


def _words(counts: list[tuple[str, int]], mark: str = "") -> str:
    return " ".join(f"{word}{mark}" for word, n in counts for _ in range(n))


# --- 003: "sun sung sunny runny" -------------------------------------------------------------

# "Word / Frequency in corpus: sun_ 5, sung_ 2, sunny_ 4, runny_ 3"
WORDS_003 = [("sun", 5), ("sung", 2), ("sunny", 4), ("runny", 3)]
# "Initial symbols. Splitting into characters gives the starting alphabet: s, u, n, g, y, r, _."
ALPHABET_003 = ["s", "u", "n", "g", "y", "r", "_"]
# "Rank / Merge: 1 u + n, 2 s + un, 3 n + y, 4 ny + _"
MERGES_003 = [("u", "n"), ("s", "un"), ("n", "y"), ("ny", "_")]


def test_003_merges_match_the_article():
    vocab_size = 1 + len(ALPHABET_003) + len(MERGES_003)  # <unk> + 7 letters + 4 merges = 12
    tokenizer = _train(_words(WORDS_003, MARK), vocab_size=vocab_size)

    # Merge 3 is a tie at 7 between (n, y) and (y, _); both the article ("first maximal pair
    # encountered") and the library (smaller ids: n < y) take (n, y).
    assert _merges(tokenizer) == MERGES_003
    assert set(tokenizer.get_vocab()) == {UNK, *ALPHABET_003, "un", "sun", "ny", "ny_"}


def test_003_encodings_match_the_article():
    tokenizer = _train(_words(WORDS_003, MARK), vocab_size=12)

    # "token sequences ['sun', '_'] for sun, ['g', 'un', 'ny_'] for gunny, and
    #  ['sun', 'n', 'n', 'ny_'] for sunnnny"
    assert _tokens(tokenizer, "sun_") == ["sun", "_"]
    assert _tokens(tokenizer, "gunny_") == ["g", "un", "ny_"]
    assert _tokens(tokenizer, "sunnnny_") == ["sun", "n", "n", "ny_"]


def test_003_pair_counts_match_the_article():
    # "(u, n) 5 + 2 + 4 + 3 = 14", then "(s, un) ... 11", then "(n, y) ... 7", "(ny, _) ... 7".
    text = _words(WORDS_003, MARK)
    counts = {15: 0, 14: 1, 12: 1, 11: 2, 8: 2, 7: 4}
    for min_frequency, n_merges in counts.items():
        tokenizer = _train(text, vocab_size=100, min_frequency=min_frequency)
        assert _merges(tokenizer) == MERGES_003[:n_merges], min_frequency


def test_003_suffix_option_gives_different_merges():
    # The same corpus with end_of_word_suffix="_": the words are s u n_ / s u n g_ /
    # s u n n y_ / r u n n y_. (u, n) is no longer 14 but 9, because the final "n" of "sun" is
    # the symbol "n_"; so merge 1 is (s, u) at 11 instead of the article's (u, n) at 14, and
    # the article's ("ny", "_") cannot exist. Not a tie-break: different pair counts.
    # Alphabet: <unk>, s u n g y r, and the word-final symbols n_ g_ y_ -> 10, + 4 merges.
    tokenizer = _train(_words(WORDS_003), vocab_size=14, end_of_word_suffix="_")

    assert _merges(tokenizer) == [("s", "u"), ("n", "n"), ("nn", "y_"), ("su", "n_")]
    assert _tokens(tokenizer, "sun") == ["sun_"]  # article: sun, _
    assert _tokens(tokenizer, "gunny") == ["g", "u", "nny_"]  # article: g, un, ny_
    assert _tokens(tokenizer, "sunnnny") == ["su", "nn", "nny_"]  # article: sun, n, n, ny_


# --- 004: "low lowest newer wider new" -------------------------------------------------------

# "Train on the toy corpus low×5 lowest×2 newer×6 wider×3 new×2." (end marker: · / </w>)
WORDS_004 = [("low", 5), ("lowest", 2), ("newer", 6), ("wider", 3), ("new", 2)]
# "vocabulary 11 tokens ·deilnorstw"
ALPHABET_004 = ["_", "d", "e", "i", "l", "n", "o", "r", "s", "t", "w"]


def test_004_first_merge_and_encodings_match_the_article():
    tokenizer = _train(_words(WORDS_004, MARK), vocab_size=1 + len(ALPHABET_004) + 1)

    # "e r and r · tie at 9; ... (first pair seen), so merge 1 is e + r -> er." The library
    # breaks the tie the same way ((e, r) has smaller ids than (r, _)).
    assert _merges(tokenizer) == [("e", "r")]
    assert set(tokenizer.get_vocab()) == {UNK, *ALPHABET_004, "er"}
    # "Now newer is n e w er · and wider is w i d er ·"
    assert _tokens(tokenizer, "newer_") == ["n", "e", "w", "er", "_"]
    assert _tokens(tokenizer, "wider_") == ["w", "i", "d", "er", "_"]


def test_004_all_sixteen_merges():
    # The widget trains to "Automerge 0 / 16" and the article's loop stops when
    # "max(pairs.values()) < 2", hence min_frequency=2. 12 + 16 = 28.
    tokenizer = _train(_words(WORDS_004, MARK), vocab_size=28, min_frequency=2)

    # The article prints only merge 1. Its code, run as printed (first-seen wins ties), learns:
    #   e+r, er+_, n+e, ne+w, l+o, lo+w, new+er_, low+_, w+i, wi+d, wid+er_,
    #   low+e, lowe+s, lowes+t, lowest+_, new+_
    # The library differs only where counts tie:
    #   merges 3-4 (tie at 8: (n, e) vs (e, w)): article n+e, ne+w; library e+w, n+ew.
    #   merges 9-11 (tie at 3: (w, i), (i, d), (d, er_)): article w+i, wi+d, wid+er_;
    #     library d+er_, i+der_, w+ider_.
    #   merges 12-16 (tie at 2: (low, e), (e, s), (s, t), (t, _), (new, _)): article
    #     low+e, lowe+s, lowes+t, lowest+_, new+_; library e+s, t+_, new+_, low+es, lowes+t_.
    # Same 16 counts (9 9 8 8 7 7 6 5 3 3 3 2 2 2 2 2) and the same five whole words at the end.
    assert _merges(tokenizer) == [
        ("e", "r"), ("er", "_"), ("e", "w"), ("n", "ew"), ("l", "o"), ("lo", "w"),
        ("new", "er_"), ("low", "_"), ("d", "er_"), ("i", "der_"), ("w", "ider_"),
        ("e", "s"), ("t", "_"), ("new", "_"), ("low", "es"), ("lowes", "t_"),
    ]
    for word, _ in WORDS_004:
        assert _tokens(tokenizer, word + MARK) == [word + MARK]


def test_004_pair_counts_match_the_article():
    # The article's count table: "e r 9, r · 9, w e 8, n e 8, e w 8, l o 7". The trainer merges
    # (e, r) at 9, then (er, _) at 9, then the two 8s, then the two 7s.
    text = _words(WORDS_004, MARK)
    for min_frequency, n_merges in {10: 0, 9: 2, 8: 4, 7: 6}.items():
        tokenizer = _train(text, vocab_size=100, min_frequency=min_frequency)
        assert len(_merges(tokenizer)) == n_merges, min_frequency


def test_004_suffix_option_gives_different_merges():
    # end_of_word_suffix="</w>": newer is n e w e r</w>, so the article's e + r (9) and r + ·
    # (9) become the single pair (e, r</w>) at 9. Alphabet: <unk> + d e i l n o r s t w +
    # w</w> t</w> r</w> = 14; + 1 merge.
    tokenizer = _train(_words(WORDS_004), vocab_size=15, end_of_word_suffix="</w>")

    assert _merges(tokenizer) == [("e", "r</w>")]  # article: e + r -> er
    assert _tokens(tokenizer, "newer") == ["n", "e", "w", "er</w>"]  # article: n e w er ·
    assert _tokens(tokenizer, "wider") == ["w", "i", "d", "er</w>"]  # article: w i d er ·


# --- 000: the six-line Spanish corpus --------------------------------------------------------

CORPUS_000 = """
el niño juega en el jardín la niña juega en el jardín
el niño aprende programación la niña aprende programación
la programación se aprende programando y programando se aprende
el profesor enseña programación la profesora enseña programación
enseñar no es lo mismo que aprender el niño enseña a la niña
la niña enseña al niño programación y el niño aprende
"""
# The article counts `Counter(corpus.split())` and appends "</w>" to every word; "_" stands
# in for "</w>" here.
MARKED_000 = " ".join(word + MARK for word in CORPUS_000.split())
LETTERS_000 = "acdefgijlmnopqrsuyíñó"  # the 21 letters of the corpus (no "t")
VOCAB_000_15 = 1 + len(LETTERS_000) + 1 + 15  # <unk> + letters + "_" + 15 merges = 38

# The article's first fifteen merges, with their counts:
#   1 a+</w> x18   2 p+r x16   3 e+n x13   4 o+</w> x10   5 pr+o x10   6 n+i x9   7 ni+ñ x9
#   8 l+</w> x8    9 n+</w> x8  10 e+</w> x8  11 pro+g x8  12 prog+r x8  13 progr+a x8
#   14 progra+m x8  15 program+a x8
ARTICLE_COUNTS_000 = [18, 16, 13, 10, 10, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8]


def test_000_first_fifteen_merges():
    tokenizer = _train(MARKED_000, vocab_size=VOCAB_000_15)

    # Merges 1-5 are the article's. Then two ties, resolved differently:
    #   merges 6-7, tie at 9 between (n, i) and (i, ñ): article "n + i -> ni", "ni + ñ -> niñ";
    #     the library takes (i, ñ) (i < n) then n + iñ. Same token "niñ" after merge 7.
    #   merges 8-15, tie at 8 between (l, </w>), (n, </w>), (e, </w>), (pro, g), (g, r), (r, a),
    #     (a, m), (m, a): the article takes them in the order first seen ("l + </w>",
    #     "n + </w>", "e + </w>", then the staircase pro+g, prog+r, progr+a, progra+m,
    #     program+a); the library takes the smallest ids first: a+m, e+_, g+r, l+_, n+_,
    #     then pro+gr, am+a, progr+ama. Same last token, "programa", after merge 15, but not
    #     the article's "letter by letter" staircase (prog, progra, program are never tokens).
    assert _merges(tokenizer) == [
        ("a", "_"), ("p", "r"), ("e", "n"), ("o", "_"), ("pr", "o"),
        ("i", "ñ"), ("n", "iñ"),
        ("a", "m"), ("e", "_"), ("g", "r"), ("l", "_"), ("n", "_"),
        ("pro", "gr"), ("am", "a"), ("progr", "ama"),
    ]
    assert tokenizer.get_vocab_size() == VOCAB_000_15


def test_000_merge_counts_match_the_article():
    # Training stops at the first pair counted below min_frequency, so the number of merges
    # learned with min_frequency=k is the number of the article's merges counted >= k; in
    # particular min_frequency=8 stops exactly after the article's fifteen (merge 16 is 7).
    for min_frequency in (19, 18, 17, 16, 14, 13, 11, 10, 9, 8):
        tokenizer = _train(MARKED_000, vocab_size=1000, min_frequency=min_frequency)
        expected = sum(count >= min_frequency for count in ARTICLE_COUNTS_000)
        assert len(_merges(tokenizer)) == expected, min_frequency


def test_000_encodings_match_the_article():
    tokenizer = _train(MARKED_000, vocab_size=VOCAB_000_15)

    # ">>> encode("programación", merges)  ('programa', 'c', 'i', 'ó', 'n</w>')"
    assert _tokens(tokenizer, "programación_") == ["programa", "c", "i", "ó", "n_"]
    # "niño -> niñ o</w>", "enseñar -> en s e ñ a r </w>"
    assert _tokens(tokenizer, "niño_") == ["niñ", "o_"]
    assert _tokens(tokenizer, "enseñar_") == ["en", "s", "e", "ñ", "a", "r", "_"]
    # "criptomoneda -> c r i p t o m o n e d a</w>" and "There is no UNK anywhere ... single
    # letters are always in the vocabulary". Not on this corpus: no word of it has a "t", so a
    # real tokenizer has no "t" and writes <unk> where the article's toy `encode` (which never
    # looks at a vocabulary) keeps the letter.
    assert _tokens(tokenizer, "criptomoneda_") == ["c", "r", "i", "p", UNK, "o", "m", "o", "n", "e", "d", "a_"]


def test_000_programacion_becomes_one_token_at_merge_24():
    # "Nine merges later, number 24 glues programació to n</w> and the whole word becomes a
    # single token". The library also needs exactly 24, but its merge 24 is
    # programaci + ón_ (it learned ó + n_ at merge 20) rather than programació + n</w>.
    before = _train(MARKED_000, vocab_size=VOCAB_000_15 + 8)  # 23 merges
    after = _train(MARKED_000, vocab_size=VOCAB_000_15 + 9)  # 24 merges

    assert len(_merges(after)) == 24
    assert _merges(after)[-1] == ("programaci", "ón_")
    assert _tokens(before, "programación_") == ["programaci", "ón_"]  # article: programació n</w>
    assert _tokens(after, "programación_") == ["programación_"]


def test_000_suffix_option():
    # end_of_word_suffix="</w>": the article's five marker merges (a, o, l, n, e + </w>) are
    # already symbols of the initial alphabet (a</w>, o</w>, ...), so the counts >= 8 give
    # ten merges, not fifteen: the article's other ten up to the tie-breaking above. (e, n)
    # counts 11 here, not 13: the word "en" is e + n</w>. Alphabet: <unk> + 21 letters +
    # a</w> e</w> l</w> n</w> o</w> r</w> s</w> y</w> = 30; + 10 merges.
    tokenizer = _train(CORPUS_000, vocab_size=40, end_of_word_suffix="</w>")

    assert _merges(tokenizer) == [
        ("p", "r"), ("e", "n"), ("pr", "o"), ("i", "ñ"), ("n", "iñ"),
        ("a", "m"), ("g", "r"), ("pro", "gr"), ("am", "a"), ("progr", "ama"),
    ]
    assert len(_merges(_train(CORPUS_000, vocab_size=1000, min_frequency=8, end_of_word_suffix="</w>"))) == 10
    assert _tokens(tokenizer, "programación") == ["programa", "c", "i", "ó", "n</w>"]  # as the article
    assert _tokens(tokenizer, "niño") == ["niñ", "o</w>"]  # as the article
    assert _tokens(tokenizer, "enseñar") == ["en", "s", "e", "ñ", "a", "r</w>"]  # article: ... a r </w>
    assert _tokens(tokenizer, "criptomoneda") == ["c", "r", "i", "p", UNK, "o", "m", "o", "n", "e", "d", "a</w>"]
