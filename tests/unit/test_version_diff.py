"""Tokens added and removed between versions, and byte-level tokens shown as text."""

from tokenmill.versions.diff import readable_token, vocabulary_diff


def test_diff_lists_added_and_removed_tokens_by_id():
    old = {"a": 0, "b": 1, "ab": 2, "zz": 3}
    new = {"a": 0, "b": 1, "ab": 2, "abb": 4, "ba": 3}
    diff = vocabulary_diff(old, new)
    assert diff.added == [("ba", 3), ("abb", 4)]
    assert diff.removed == [("zz", 3)]
    assert diff.kept == 3


def test_identical_vocabularies_differ_in_nothing():
    diff = vocabulary_diff({"x": 0}, {"x": 5})
    assert (diff.added, diff.removed, diff.kept) == ([], [], 1)


def test_byte_level_tokens_read_as_text():
    assert readable_token("Ġthe", True) == " the"
    assert readable_token("ĠserÃ¡n", True) == " serán"
    assert readable_token("Ċ", True) == "\n"
    assert readable_token("Ã", True) == "\ufffd"  # half of a two-byte character
    assert readable_token("<|endoftext|>", True) == "<|endoftext|>"
    assert readable_token("▁the", True) == "▁the"  # not a byte-level alphabet character: kept
    assert readable_token("Ġthe", False) == "Ġthe"
