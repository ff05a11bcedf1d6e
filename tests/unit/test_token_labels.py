"""Each token labelled by its own text (service/web/tokens.py): byte-fallback tokens as <0xNN>, byte-level
tokens as their bytes with a cut character's bytes as <0xNN>, and one space glyph everywhere."""

from service.web.tokens import bytes_label, version_labeller, visible
from tokenmill.formats.tiktoken_format import BYTE_DECODER

BYTE_ENCODER = {byte: char for char, byte in BYTE_DECODER.items()}


def byte_level(text: bytes) -> str:
    """A byte-level token string ("Ġthe") for these bytes."""
    return "".join(BYTE_ENCODER[b] for b in text)


def test_whole_characters_read_as_themselves_and_cut_ones_as_their_bytes():
    assert bytes_label(" Мальчик".encode()) == "␣Мальчик"
    word = "Мальчик".encode()
    assert bytes_label(word[:1]) == "<0xD0>" and bytes_label(word[1:4]) == "<0x9C>а" and bytes_label(word[1:3]) == "<0x9C><0xD0>"
    assert bytes_label(b"\xff\xfe") == "<0xFF><0xFE>" and bytes_label(b"") == "∅"


def test_a_byte_level_version_labels_its_tokens_as_their_bytes():
    label = version_labeller({"byte_level": True, "pre_tokenizer": "gpt2"})
    assert label(byte_level(b" the")) == "␣the"
    assert label(byte_level("М".encode()[:1])) == "<0xD0>"
    assert label(byte_level(b"\n\t")) == "↵⇥"
    assert label("<|endoftext|>") == "<|endoftext|>"


def test_byte_fallback_and_metaspace_tokens():
    label = version_labeller({"byte_level": False, "library": "sentencepiece", "pre_tokenizer": "metaspace"})
    assert [label(t) for t in ("▁Ма", "<0xD0>", "<0x9c>", "▁")] == ["␣Ма", "<0xD0>", "<0x9C>", "␣"]
    wordpiece = version_labeller({"byte_level": False, "algorithm": "wordpiece", "pre_tokenizer": "whitespace"})
    assert wordpiece("##ing") == "##ing" and wordpiece("▁x") == "▁x"  # no metaspace: the character is text


def test_one_glyph_per_space_and_control_character():
    assert visible("a b\nc\td\re\x01") == "a␣b↵c⇥d␍e<0x01>" and visible("") == "∅"
