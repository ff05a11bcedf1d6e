"""Extending a byte-level BPE (tokenmill.jobs.extension): every base token keeps its id, new merges
follow, and text the new merges do not touch encodes to the base's ids."""

import base64
import json
from collections import Counter

import pytest
import tiktoken
from tokenizers import Tokenizer

from tests.text import flores_lines
from tokenmill.evaluation.references import load_reference
from tokenmill.jobs.extension import Base, extended_ranks, extension_files, piece_counts, pieces_of
from tokenmill.training.counting.merge import cost
from tokenmill.training.spec import resolve_spec

HINDI = flores_lines(600, languages=("hin_Deva",))
ENGLISH = "The quick brown fox jumps over the lazy dog, 42 times."


def test_the_base_keeps_every_id_and_new_tokens_follow():
    gpt2 = load_reference("gpt2")
    base = Base(gpt2, "reference:gpt2")
    ranks, added = extended_ranks(base, piece_counts(HINDI, gpt2._pat_str)[0], 800)
    assert added == 800
    assert all(ranks[token] == rank for token, rank in gpt2._mergeable_ranks.items())
    new = sorted(rank for rank in ranks.values() if rank >= base.next_id)
    assert new == list(range(50257, 50257 + 800))  # after <|endoftext|> (50256), which stays where it was
    extended = tiktoken.Encoding("x", pat_str=gpt2._pat_str, mergeable_ranks=ranks, special_tokens=gpt2._special_tokens)
    assert extended.encode(ENGLISH) == gpt2.encode(ENGLISH)  # no piece of it holds a new pair
    held_out = flores_lines(997, languages=("hin_Deva",))[900]
    assert len(extended.encode(held_out)) < 0.7 * len(gpt2.encode(held_out))
    assert extended.decode(extended.encode(held_out)) == held_out


@pytest.mark.slow
def test_the_files_load_everywhere_with_the_same_ids(tmp_path):
    spec = resolve_spec({"vocab_size": 50257 + 300, "base": {"reference": "gpt2"}}).model_copy(
        update={"base": resolve_spec({"vocab_size": 50557, "base": {"reference": "gpt2"}}).base.model_copy(
            update={"vocab_size": 50257})})
    gpt2 = load_reference("gpt2")
    trained = extension_files(spec, Base(gpt2, "reference:gpt2"), HINDI, lambda *a, **k: None, {"job_id": "x"})
    assert trained.vocab_size == 50557
    tokenizer = Tokenizer.from_str(trained.files["tokenizer.json"].decode())
    manifest = json.loads(trained.files["manifest.json"])
    assert manifest["lineage"]["base"]["merges_added"] == 300 and manifest["spec"]["base"]["reference"] == "gpt2"
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in trained.files["tokenizer.tiktoken"].splitlines())}
    again = tiktoken.Encoding("again", pat_str=manifest["tiktoken"]["pat_str"], mergeable_ranks=ranks,
                              special_tokens=manifest["tiktoken"]["special_tokens"])
    text = HINDI[3] + " " + ENGLISH + " <|endoftext|>"
    assert tokenizer.encode(text, add_special_tokens=False).ids == again.encode(text, allowed_special="all")
    assert tokenizer.encode(ENGLISH, add_special_tokens=False).ids == gpt2.encode(ENGLISH)


def test_pieces_counted_by_the_counting_children_are_those_a_regex_finds():
    import regex

    from tokenmill.training.patterns import SUPERWORD_SPLIT

    texts = HINDI[:200] + [line.upper() for line in HINDI[:50]]
    for pattern, floor in ((load_reference("gpt2")._pat_str, 1), (SUPERWORD_SPLIT, 2)):
        expected = Counter(piece.encode() for text in texts for piece in regex.findall(pattern, text))
        expected = Counter({piece: n for piece, n in expected.items() if n >= floor})
        counts, pruned = piece_counts(texts, pattern, floor, processes=2)
        assert Counter(dict(pieces_of(counts))) == expected
        assert pruned.kept == len(expected) and pruned.threshold == floor


def test_spans_past_the_budget_keep_those_seen_at_least_the_threshold_reached_and_say_so():
    from tokenmill.training.patterns import SUPERWORD_SPLIT

    texts = HINDI[:300]
    everything, _ = piece_counts(texts, SUPERWORD_SPLIT, 2, processes=2)
    at_floor = [piece for piece, n in pieces_of(everything) if n >= 2]
    budget = cost(len(at_floor), sum(map(len, at_floor))) // 2  # half of what the floor alone keeps
    squeezed, pruned = piece_counts(texts, SUPERWORD_SPLIT, 2, processes=2, budget=budget)
    assert pruned.raised and pruned.threshold > 2 and pruned.dropped > 0 and 0 < pruned.record()["dropped_share"] < 1
    kept = dict(pieces_of(squeezed))
    assert kept == {piece: n for piece, n in pieces_of(everything) if n >= pruned.threshold}
    assert pruned.kept == len(kept) and cost(len(kept), sum(map(len, kept))) <= budget
