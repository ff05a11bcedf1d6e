"""Where a split regex cuts words inside (a floor no merge can pass): GPT-2's pattern at every vowel sign
of Devanagari, o200k's not at all, and punctuation never counted as a cut."""

import pytest

from tests.text import flores_lines
from tokenmill.playground.split_floor import PATTERNS, is_notable, split_cuts


def test_gpt2_cuts_devanagari_at_its_vowel_signs_and_o200k_does_not():
    hindi = flores_lines(100, languages=("hin_Deva",))
    gpt2, o200k = split_cuts(PATTERNS["gpt2"], hindi), split_cuts(PATTERNS["o200k"], hindi)
    assert gpt2["cut_share"] > 0.8 and gpt2["pieces_per_word"] > 3 and is_notable(gpt2)
    assert gpt2["cut_at"][0].startswith("at combining marks")
    assert "".join(gpt2["example"]["pieces"]) == gpt2["example"]["word"] and len(gpt2["example"]["pieces"]) > 3
    assert o200k["cut_share"] < 0.01 and not is_notable(o200k)


@pytest.mark.parametrize("name", PATTERNS)
def test_punctuation_and_latin_words_are_no_cut(name):
    cuts = split_cuts(PATTERNS[name], ["The U.S. garden, at 40 km/h.", "他们发明了一种，可以将细胞。"] * 20)
    assert cuts["cut_share"] == 0 and cuts["pieces_per_word"] == 1.0 and cuts["example"] is None


def test_one_cut_word_in_two():
    cuts = split_cuts(PATTERNS["gpt2"], ["नमस्ते ok"])
    assert cuts["words"] == 2 and cuts["cut_share"] == 0.5
    assert cuts["example"]["pieces"] == ["नमस", "्", "त", "े"]
    assert cuts["pieces_per_word"] == (4 + 1) / 2
