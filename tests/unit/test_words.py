"""Word counting across scripts: whitespace words, and one word per no-space character."""

import itertools
import re

import numpy as np
import regex

from tokenmill.corpora.words import (
    NO_SPACE_RANGES,
    NO_SPACE_SCRIPTS,
    PER_CHARACTER,
    WHITESPACE,
    code_points,
    contains_no_space_script,
    count_words,
    scan_words,
    word_rule,
    word_spans,
)


def words_of(text: str) -> list[str]:
    return [text[start:end] for start, end in word_spans(text)]


def test_latin_words_are_whitespace_separated_with_punctuation_attached():
    text = "The boy plays in the garden."
    assert word_spans(text) == [(0, 3), (4, 7), (8, 13), (14, 16), (17, 20), (21, 28)]
    assert count_words(text) == 6 == len(text.split())
    assert not contains_no_space_script(text)


def test_every_whitespace_str_split_knows_separates_words():
    # NBSP, ideographic space, line separator and the file separator U+001C all cut.
    text = " a\u00a0b\u3000c\u2028d\x1ce\t\tf "
    assert words_of(text) == ["a", "b", "c", "d", "e", "f"] == text.split()


def test_chinese_counts_one_word_per_character_and_punctuation_clings():
    # 我 爱 北 京 are four characters; the ideographic full stop joins the last one.
    assert words_of("我爱北京。") == ["我", "爱", "北", "京。"]
    assert word_spans("我爱北京。") == [(0, 1), (1, 2), (2, 3), (3, 5)]
    assert contains_no_space_script("我爱北京。")


def test_thai_counts_characters_with_their_combining_marks():
    # ภาษาไทย: ภ า ษ า ไ ท ย = 7; ง่าย: ง+่ (tone mark) า ย = 3; 7 + 3 = 10.
    text = "ภาษาไทย ง่าย"
    assert words_of(text) == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย", "ง่", "า", "ย"]
    assert count_words(text) == 10


def test_japanese_kanji_kana_and_latin_mixed():
    # 東 京 は (3) + big city (2) = 5.
    assert words_of("東京は big city") == ["東", "京", "は", "big", "city"]
    # 私 は コ ー ヒ ー を 飲 み ま す。 = 11: the prolonged sound mark ー is kana.
    text = "私はコーヒーを飲みます。"
    assert words_of(text) == ["私", "は", "コ", "ー", "ヒ", "ー", "を", "飲", "み", "ま", "す。"]
    assert count_words(text) == 11


def test_latin_run_next_to_han_is_one_word():
    assert words_of("abc東京") == ["abc", "東", "京"]
    assert word_spans("abc東京") == [(0, 3), (3, 4), (4, 5)]


def test_brackets_cling_but_lone_punctuation_between_spaces_is_a_word():
    assert words_of("「東京」") == ["「東", "京」"]
    assert words_of("東 — 京") == ["東", "—", "京"]
    assert words_of("２０２６年") == ["２０２６", "年"]


def test_scripts_that_use_spaces_are_not_per_character():
    for text in ["안녕하세요 세계", "Привет мир", "nin\u0303o dʼun"]:  # Korean, Cyrillic, NFD ñ
        assert count_words(text) == 2
        assert not contains_no_space_script(text)


def test_empty_and_blank_lines_have_no_words():
    assert word_spans("") == [] == word_spans("  \t ")
    assert count_words("") == 0


def test_word_rule_names_the_rule_applied():
    assert word_rule(False) == WHITESPACE == "whitespace"
    assert word_rule(True) == PER_CHARACTER
    assert PER_CHARACTER != WHITESPACE


def test_count_words_agrees_with_word_spans():
    for text in ["東京は big city", "ภาษาไทย ง่าย", "a b", "「東京」へ行く。", ""]:
        assert count_words(text) == len(word_spans(text))


def test_text_without_no_space_characters_is_split_at_whitespace():
    for text in ["", " ", "a", " The  boy\u3000plays\x1c \u2028in the garden. ", "x\U0001f600y z", "_(a)_ é\u0301"]:
        spans, saw_no_space = scan_words(code_points(text))
        assert spans.tolist() == [[m.start(), m.end()] for m in re.finditer(r"\S+", text)]
        assert not saw_no_space
    assert scan_words(code_points("a 東"))[1]


def test_range_table_matches_unicode_script_properties():
    # The table must equal: Script in NO_SPACE_SCRIPTS, or Script_Extensions in them but
    # not shared with Latin; letters, marks and numbers only. Unassigned code points are
    # free (the table bridges them). On failure, regenerate the table from `expected`.
    scx = "".join(rf"\p{{scx={name}}}" for name in NO_SPACE_SCRIPTS)
    sc = "".join(rf"\p{{sc={name}}}" for name in NO_SPACE_SCRIPTS)
    rule = rf"[[[{sc}][[{scx}]--\p{{scx=Latin}}]]&&[\p{{L}}\p{{M}}\p{{N}}]]+"
    everything = "".join(map(chr, range(0x110000)))
    expected = np.zeros(0x110000, dtype=bool)
    for match in regex.finditer(rule, everything, regex.V1):
        expected[match.start() : match.end()] = True
    assigned = np.ones(0x110000, dtype=bool)
    for match in regex.finditer(r"\p{Cn}+", everything):
        assigned[match.start() : match.end()] = False
    table = np.zeros(0x110000, dtype=bool)
    for first, last in NO_SPACE_RANGES:
        table[first : last + 1] = True
    wrong = np.flatnonzero((table != expected) & assigned)
    assert wrong.size == 0, [hex(c) for c in wrong[:20]]
    # Sorted and disjoint, so it reads as a table.
    assert all(a[1] < b[0] for a, b in itertools.pairwise(NO_SPACE_RANGES))


def test_compiled_scan_equals_the_regex_scan_on_random_text():
    import random

    from tokenmill.corpora.words import _WORD

    # One or two of each class: no-space letters (A), no-space marks (M), clinging (P),
    # other (O) and whitespace, including the underscore and marks of other scripts.
    alphabet = ["東", "ท", "ー", "\u0e48", "\u0e35", "。", ",", "_", "\u0301", "(", "a", "1", "é", "Ж", " ", "\n", "\u3000"]
    rng = random.Random(7)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        expected = [match.span() for match in _WORD.finditer(text)]
        assert scan_words(code_points(text))[0].tolist() == [list(span) for span in expected], repr(text)


def test_compiled_scan_equals_the_regex_scan_on_real_text():
    from tests.services import FIXTURES
    from tokenmill.corpora.words import _WORD

    for name in ("jpn_Jpan", "tha_Thai", "zho_Hans", "khm_Khmr", "mya_Mymr", "bod_Tibt", "lao_Laoo", "eng_Latn"):
        text = (FIXTURES / "parallel_flores200_dev" / f"{name}.txt").read_text()[:20000]
        expected = [match.span() for match in _WORD.finditer(text)]
        assert scan_words(code_points(text))[0].tolist() == [list(span) for span in expected], name
