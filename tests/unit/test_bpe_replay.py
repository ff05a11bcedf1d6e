"""A stored version's first merges replayed on a sample (tokenmill.playground.bpe_replay), from the files training writes."""

import json

import pytest

from tests.text import flores_lines
from tokenmill.errors import InvalidInput
from tokenmill.playground.bpe_replay import (
    parse_merges,
    pre_tokenize,
    read_sample,
    replay,
    sample_words,
)
from tokenmill.playground.bpe_steps import DEFAULT_CORPUS, MAX_CHARACTERS, corpus_words, step_through
from tokenmill.training import with_tokenizers
from tokenmill.training.export import bpe_files
from tokenmill.training.spec import resolve_spec

TEXTS = flores_lines(20, languages=("eng_Latn",))


def trained(**spec) -> str:
    """tokenizer.json of a version trained on TEXTS, as a worker writes it."""
    return with_tokenizers.train(resolve_spec({"vocab_size": 350, **spec}), TEXTS).to_str()


def replayed_on_texts(tokenizer_json: str, steps: int = 60):
    model = json.loads(tokenizer_json)["model"]
    sample = read_sample(iter(TEXTS), 100)
    words = sample_words(pre_tokenize(tokenizer_json, sample.texts), model.get("continuing_subword_prefix"),
                         model.get("end_of_word_suffix"))
    return replay(words, parse_merges(tokenizer_json.encode()), steps)


@pytest.mark.parametrize("spec", [
    {},  # byte-level BPE split by GPT-2's regex (probed in the sandbox first)
    {"byte_level": False, "pre_tokenizer": "metaspace"},
    {"byte_level": False, "pre_tokenizer": "whitespace", "end_of_word_suffix": "</w>"},
])
def test_on_its_own_training_text_each_merge_was_the_samples_most_frequent_pair(spec):
    tokenizer_json = trained(**spec)
    run = replayed_on_texts(tokenizer_json)
    assert [m.pair for m in run.merges] == parse_merges(tokenizer_json.encode())[:60]
    for state in run.states[:-1]:
        assert state.next.count == state.pairs[0][1] > 0, (state.step, state.next, state.pairs[:3])
    assert run.vocabulary[-1] == run.merges[-1].token


def test_the_words_start_as_the_model_starts_them():
    byte_level = replayed_on_texts(trained(), 0).states[0].words
    assert any(w.tokens[:2] == ("Ġ", "t") for w in byte_level)  # " the" as GPT-2's byte characters
    suffixed = replayed_on_texts(trained(byte_level=False, pre_tokenizer="whitespace", end_of_word_suffix="</w>"), 0)
    assert all(w.tokens[-1].endswith("</w>") for w in suffixed.states[0].words)
    assert sample_words(["abc"], prefix="##")[0].tokens == ("a", "##b", "##c")


def test_a_pair_the_sample_never_has_counts_zero_and_changes_nothing():
    words = corpus_words(DEFAULT_CORPUS)
    run = replay(words, [("x", "y"), ("e", "r")], 5)
    assert [(m.pair, m.count) for m in run.merges] == [(("x", "y"), 0), (("e", "r"), 9)]
    assert run.states[1].words == run.states[0].words and run.done  # two merges of the five asked for
    # Replaying the step-through's own merges gives its counts back.
    learned = step_through(DEFAULT_CORPUS)
    again = replay(words, [m.pair for m in learned.merges], 16)
    assert [m.count for m in again.merges] == [m.count for m in learned.merges]


def test_merges_parse_from_every_file_format():
    tokenizer_json = trained(byte_level=False, pre_tokenizer="whitespace")
    merges = parse_merges(tokenizer_json.encode())
    assert merges and all(isinstance(pair, tuple) and len(pair) == 2 for pair in merges)
    assert parse_merges(merges_txt=bpe_files(tokenizer_json)["merges.txt"]) == merges
    legacy = json.loads(tokenizer_json)
    legacy["model"]["merges"] = [" ".join(pair) for pair in legacy["model"]["merges"]]
    assert parse_merges(json.dumps(legacy).encode()) == merges
    with pytest.raises(InvalidInput) as refused:
        parse_merges(trained(algorithm="unigram", vocab_size=100).encode())
    assert refused.value.field == "tokenizer"


def test_the_sample_stops_before_the_character_bound():
    line = "word " * 700  # 3,500 characters
    sample = read_sample(iter([line] * 5), 5)
    assert (len(sample.texts), sample.characters, sample.truncated) == (2, 7000, True)
    long = read_sample(iter(["abc " * 5000]), 3)  # one line past the bound: cut at a space
    assert long.truncated and long.characters <= MAX_CHARACTERS and long.texts[0].endswith("abc")
    lines = read_sample(iter(["a", "b", "c"]), 2)  # the line count reached first: not truncated
    assert (lines.texts, lines.characters, lines.truncated) == (["a", "b"], 2, False)


