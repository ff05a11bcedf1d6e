"""Tokens by script (tokenmill.playground.scripts), on hand-picked tokens."""

from tokenmill.playground.scripts import PARTIAL, ranks_by_script, vocabulary_by_script


def test_each_token_falls_in_one_category():
    vocab = {"the": 0, "Ġthe": 1, "ĠÐ¿": 2, "ä¸Ń": 3, "123": 4, "ĠĠ": 5, "!!": 6, "<|endoftext|>": 7, "Ð": 8,
             "aÐ¿": 9}
    counts = vocabulary_by_script(vocab, ["<|endoftext|>"], byte_level=True)
    # "ĠÐ¿" is " п", "ä¸Ń" is "中", "Ð" alone is half a character, "aÐ¿" mixes Latin and Cyrillic.
    assert counts == {"Latin": 2, "Cyrillic": 1, "Han": 1, "mixed script": 1, "digits": 1, "whitespace": 1,
                      "punctuation & symbols": 1, PARTIAL: 1, "special": 1}


def test_sentencepiece_and_wordpiece_pieces():
    counts = vocabulary_by_script({"▁hello": 0, "##ing": 1, "<0xD0>": 2, "ひら": 3, "カタ": 4, "한국": 5, "नमस्ते": 6},
                                  [], byte_level=False)
    assert counts == {"Latin": 2, "Devanagari": 1, "Hangul": 1, "Japanese kana": 2, PARTIAL: 1}


def test_rank_tables_count_bytes():
    assert ranks_by_script([b"a", b"\xd0", "п".encode(), b" 12"], specials=2) == \
        {"Latin": 1, "Cyrillic": 1, "digits": 1, PARTIAL: 1, "special": 2}
