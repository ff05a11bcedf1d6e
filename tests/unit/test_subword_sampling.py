"""Subword regularisation (tokenmill.sandboxed.subword_sampling): seeded BPE-dropout and Unigram sampling over a
version's own pipeline (sentencepiece versions included), the options' bounds, the spec's recorded
defaults and tokenizer.dropout.json, and evaluation left deterministic."""

import json
import random
from collections import Counter

import pytest
import sentencepiece
from pydantic import ValidationError
from tokenizers import Tokenizer

from tests.text import flores_lines
from tokenmill.errors import InvalidInput
from tokenmill.evaluation.encoders import version_encoders
from tokenmill.evaluation.measuring import measure
from tokenmill.sandboxed.sandbox import Sandbox
from tokenmill.sandboxed.subword_sampling import (
    BpeDropout,
    Sampling,
    SamplingOptions,
    TokenizersSampler,
    resolve,
    sampler,
)
from tokenmill.training import with_tokenizers
from tokenmill.training.export import DROPOUT_FILE, artifact_files, manifest
from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_sentencepiece import train_sentencepiece

TRAIN = flores_lines(120)
PROBE = [*flores_lines(12, offset=400), "Héllo wörld 日本語 <|endoftext|> 1234  x\n\t  ", "", "   ", "ẞ́🙂 a"]
SPECS = {
    "byte-level bpe": {"vocab_size": 1200},
    "bpe + byte fallback": {"vocab_size": 1200, "byte_level": False, "byte_fallback": True, "pre_tokenizer": "metaspace"},
    "char bpe </w>": {"vocab_size": 2500, "byte_level": False, "pre_tokenizer": "whitespace", "end_of_word_suffix": "</w>"},
    "unigram": {"vocab_size": 1500, "algorithm": "unigram"},
    "unigram + byte fallback": {"vocab_size": 1500, "algorithm": "unigram", "byte_fallback": True},
}
BPE = ("byte-level bpe", "bpe + byte fallback", "char bpe </w>")
LOSSLESS = ("byte-level bpe", "bpe + byte fallback", "unigram + byte fallback")


@pytest.fixture(scope="module")
def trained() -> dict[str, Tokenizer]:
    out = {}
    for name, raw in SPECS.items():
        tokenizer = with_tokenizers.train(resolve_spec(raw), TRAIN)
        tokenizer.encode_special_tokens = True  # as the playground's plain encode (tokenmill.sandboxed.sandbox)
        out[name] = tokenizer
    return out


def dropout(p: float, seed: int = 0) -> Sampling:
    return Sampling("bpe-dropout", seed, dropout=p)


def unigram(alpha: float = 0.1, nbest: int = -1, seed: int = 0) -> Sampling:
    return Sampling("unigram", seed, alpha=alpha, nbest_size=nbest)


def sampled(name: str) -> Sampling:
    return dropout(0.1, 1) if name in BPE else unigram(0.1, -1, 1)


def plain(tokenizer: Tokenizer, text: str):
    encoding = tokenizer.encode(text, add_special_tokens=False)
    return encoding.ids, encoding.tokens, encoding.offsets


# ---- the samplers against the library ------------------------------------------------------------

@pytest.mark.parametrize("name", BPE)
def test_dropout_zero_is_the_plain_encode_ids_tokens_and_offsets(trained, name):
    ours = TokenizersSampler(trained[name].to_str())
    for text in PROBE:
        assert ours.encode(text, dropout(0.0)) == plain(trained[name], text), text


@pytest.mark.parametrize("name", ["unigram", "unigram + byte fallback"])
def test_the_single_best_unigram_segmentation_is_the_plain_encode(trained, name):
    ours = TokenizersSampler(trained[name].to_str())
    for text in PROBE:
        assert ours.encode(text, unigram(nbest=1)) == plain(trained[name], text), text


@pytest.mark.parametrize("name", list(SPECS))
def test_a_sampled_encode_is_seeded_varies_with_the_seed_and_costs_more_tokens(trained, name):
    ours = TokenizersSampler(trained[name].to_str())
    options = sampled(name)
    text = " ".join(PROBE[:5])
    assert ours.encode(text, options) == ours.encode(text, options)
    other = Sampling(options.method, 2, options.dropout, options.alpha, options.nbest_size)
    assert ours.encode(text, options)[0] != ours.encode(text, other)[0]
    assert ours.encode(text, options)[0] != plain(trained[name], text)[0]
    # Over a corpus sample, sampling cuts more finely than the best segmentation.
    best = sum(len(plain(trained[name], t)[0]) for t in PROBE)
    assert sum(len(ours.encode(t, options)[0]) for t in PROBE) > best


@pytest.mark.parametrize("name", LOSSLESS)
def test_a_sampled_encode_decodes_to_the_text(trained, name):
    ours = TokenizersSampler(trained[name].to_str())
    for seed in range(3):
        for text in PROBE:
            options = Sampling(sampled(name).method, seed, *([0.3, None, None] if name in BPE else [None, 0.2, -1]))
            ids, _, offsets = ours.encode(text, options)
            assert trained[name].decode(ids) == trained[name].decode(plain(trained[name], text)[0]), text
            assert all(0 <= start <= end <= len(text) for start, end in offsets)


def test_nbest_sampling_picks_among_the_n_best_segmentations(trained):
    ours = TokenizersSampler(trained["unigram"].to_str())
    text = "the government announced"
    seen = {tuple(ours.encode(text, unigram(0.5, 3, seed))[0]) for seed in range(60)}
    assert tuple(plain(trained["unigram"], text)[0]) in seen
    # Words of a piece sample independently: at most 3 segmentations of each of the three pieces.
    assert 1 < len(seen) <= 3 ** 3


def test_dropout_drops_each_applicable_merge_with_probability_p():
    # "abc" with merges (a b) then (ab c): [a b c] when the first merge is dropped (the only
    # candidate), [ab c] when it is kept and the second dropped, [abc] when both are kept.
    model = BpeDropout({"vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}, "merges": [["a", "b"], ["ab", "c"]]})
    p, runs = 0.3, 20000
    rng = random.Random(7)
    counts = Counter(tuple(token for _, token, _ in model.encode("abc", p, rng)) for _ in range(runs))
    expected = {("a", "b", "c"): p, ("ab", "c"): (1 - p) * p, ("abc",): (1 - p) ** 2}
    assert set(counts) == set(expected)
    for tokens, share in expected.items():
        assert counts[tokens] / runs == pytest.approx(share, abs=0.015)


def test_a_dropped_merge_comes_back_at_the_next_step():
    # "abcd" with merges (c d), (a b), (ab cd). (c d) dropped at the first step and (a b) kept,
    # (c d) is a candidate again at the second: abcd comes out with (1-p)^3 + p(1-p)^3, not the
    # (1-p)^3 of a dropout that dropped a merge for the whole word.
    model = BpeDropout({"vocab": {t: i for i, t in enumerate(["a", "b", "c", "d", "cd", "ab", "abcd"])},
                        "merges": [["c", "d"], ["a", "b"], ["ab", "cd"]]})
    p, runs = 0.5, 20000
    rng = random.Random(3)
    whole = sum([t for _, t, _ in model.encode("abcd", p, rng)] == ["abcd"] for _ in range(runs)) / runs
    assert whole == pytest.approx((1 - p) ** 3 * (1 + p), abs=0.015)


# ---- sentencepiece versions: through their tokenizer.json ----------------------------------------

@pytest.fixture(scope="module")
def sentencepieces() -> dict[str, tuple[bytes, str]]:
    """(tokenizer.model, tokenizer.json) of a sentencepiece unigram and bpe version."""
    out = {}
    for algorithm in ("unigram", "bpe"):
        spec = resolve_spec({"library": "sentencepiece", "algorithm": algorithm, "vocab_size": 2500, "byte_fallback": True})
        result = train_sentencepiece(spec, TRAIN)
        out[algorithm] = (result.model, result.tokenizer_json)
    return out


SP_PROBE = [text for text in PROBE if "<" not in text]  # sentencepiece reads "<|…|>" and "<s>" as plain text


@pytest.mark.parametrize("algorithm", ["unigram", "bpe"])
def test_a_sentencepiece_version_samples_sentencepieces_ids(sentencepieces, algorithm):
    model, tokenizer_json = sentencepieces[algorithm]
    ours = TokenizersSampler(tokenizer_json)
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    best, options = (dropout(0.0), dropout(0.2, 5)) if algorithm == "bpe" else (unigram(nbest=1), unigram(0.1, -1, 5))
    for text in SP_PROBE:
        assert ours.encode(text, best)[0] == processor.encode(text), text
        ids, tokens, _ = ours.encode(text, options)
        assert processor.decode(ids) == text
        assert tokens == [processor.id_to_piece(i) for i in ids]
    text = " ".join(SP_PROBE[:4])
    assert ours.encode(text, options) == ours.encode(text, options)
    assert ours.encode(text, options)[0] != processor.encode(text)
    assert sum(len(ours.encode(t, options)[0]) for t in SP_PROBE) > sum(len(processor.encode(t)) for t in SP_PROBE)


SENTENCEPIECE_SAMPLE = """
import sys, sentencepiece
processor = sentencepiece.SentencePieceProcessor(model_file=sys.argv[1])
sentencepiece.set_random_generator_seed(11)
print(processor.encode(sys.argv[2], enable_sampling=True, alpha=0.1, nbest_size=-1))
"""


def test_why_not_sentencepieces_own_sampling_its_seed_does_not_reproduce_in_another_process(sentencepieces, tmp_path):
    # If this fails, sentencepiece's seeded sampling became reproducible: it could then sample its versions.
    import subprocess
    import sys

    path = tmp_path / "unigram.model"
    path.write_bytes(sentencepieces["unigram"][0])
    text = " ".join(SP_PROBE[:3])
    runs = {subprocess.run([sys.executable, "-c", SENTENCEPIECE_SAMPLE, str(path), text], capture_output=True,
                           text=True, check=True).stdout for _ in range(3)}
    assert len(runs) > 1


def test_the_same_seed_gives_the_same_ids_in_any_sandbox_process(trained, sentencepieces):
    pools = [Sandbox(timeout=20, size=1, warm=1) for _ in range(2)]  # two processes, each its own generator
    try:
        text = " ".join(PROBE[:3])
        for key, source, options in (("t", trained["byte-level bpe"].to_str(), dropout(0.2, 11)),
                                     ("s", sentencepieces["unigram"][1], unigram(0.1, -1, 11))):
            expected = [list(part) for part in sampler(source).encode(text, options)]
            for pool in pools:
                for _ in range(2):  # loaded on the first request, cached for the second
                    answer = pool.sample(key, text, options.as_dict(), lambda s=source: s)
                    assert [list(part) for part in answer] == expected
    finally:
        for pool in pools:
            pool.close()


# ---- options, their bounds, and what each version takes ------------------------------------------

@pytest.mark.parametrize("raw, field", [
    ({"dropout": 1.0}, "dropout"), ({"dropout": -0.1}, "dropout"), ({"alpha": 0}, "alpha"), ({"alpha": 10.5}, "alpha"),
    ({"nbest_size": 0}, "nbest_size"), ({"nbest_size": 1}, "nbest_size"), ({"nbest_size": -2}, "nbest_size"),
    ({"nbest_size": 65}, "nbest_size"), ({"seed": -1}, "seed"), ({"seed": 2**31}, "seed"), ({"temperature": 1}, "temperature"),
])
def test_options_out_of_bounds_are_refused_naming_the_field(raw, field):
    with pytest.raises(ValidationError) as caught:
        SamplingOptions.model_validate(raw)
    assert caught.value.errors()[0]["loc"] == (field,)


def test_options_at_their_bounds_are_taken():
    SamplingOptions(dropout=0.0, seed=0)
    SamplingOptions(dropout=0.999, seed=2**31 - 1)
    SamplingOptions(alpha=10, nbest_size=-1)
    SamplingOptions(alpha=0.001, nbest_size=64)


def test_given_options_then_the_recorded_defaults_then_ours():
    spec = {"algorithm": "bpe", "sampling": {"dropout": 0.25, "seed": 4}}
    assert resolve(spec, SamplingOptions()) == dropout(0.25, 4)
    assert resolve(spec, SamplingOptions(dropout=0.5)) == dropout(0.5, 4)
    assert resolve({"algorithm": "bpe"}, SamplingOptions(seed=9)) == dropout(0.1, 9)
    assert resolve({"algorithm": "unigram", "sampling": {"nbest_size": 8}}, SamplingOptions()) == unigram(0.1, 8, 0)


@pytest.mark.parametrize("algorithm, options, field", [
    ("bpe", SamplingOptions(alpha=0.1), "sampling.alpha"), ("bpe", SamplingOptions(nbest_size=4), "sampling.nbest_size"),
    ("unigram", SamplingOptions(dropout=0.1), "sampling.dropout"), ("wordpiece", SamplingOptions(), "sampling"),
])
def test_options_of_another_algorithm_are_refused_naming_the_field(algorithm, options, field):
    with pytest.raises(InvalidInput) as caught:
        resolve({"algorithm": algorithm}, options)
    assert caught.value.field == field


# ---- recorded defaults: the spec, manifest.json, tokenizer.dropout.json ---------------------------

@pytest.mark.parametrize("raw, field", [
    ({"algorithm": "wordpiece", "sampling": {}}, "spec.sampling"),
    ({"sampling": {"alpha": 0.1}}, "spec.sampling.alpha"),
    ({"sampling": {"dropout": 1}}, "spec.sampling.dropout"),
    ({"sampling": {"dropout_file": True}}, "spec.sampling.dropout"),
    ({"algorithm": "unigram", "sampling": {"dropout": 0.1}}, "spec.sampling.dropout"),
    ({"algorithm": "unigram", "sampling": {"alpha": 0.1, "dropout_file": True}}, "spec.sampling.dropout_file"),
    ({"library": "sentencepiece", "algorithm": "unigram", "sampling": {"nbest_size": 1}}, "spec.sampling.nbest_size"),
])
def test_a_spec_with_sampling_that_does_not_fit_is_refused_naming_the_field(raw, field):
    with pytest.raises(InvalidInput) as caught:
        resolve_spec({"vocab_size": 1000, **raw})
    assert caught.value.field == field


def test_the_defaults_are_in_the_manifest_and_tokenizer_json_stays_deterministic(trained):
    spec = resolve_spec({"vocab_size": 1200, "sampling": {"dropout": 0.2, "seed": 3}})
    files, tiktoken = artifact_files(spec, trained["byte-level bpe"])
    recorded = json.loads(manifest(spec, {}, files, tiktoken))["spec"]["sampling"]
    assert recorded == {"dropout": 0.2, "alpha": None, "nbest_size": None, "seed": 3, "dropout_file": False}
    assert DROPOUT_FILE not in files
    assert json.loads(files["tokenizer.json"])["model"]["dropout"] is None
    assert "tokenizer.tiktoken" in files  # a dropout would have cost the rank file


def test_dropout_file_is_the_tokenizer_with_its_model_dropout_set(trained):
    spec = resolve_spec({"vocab_size": 1200, "sampling": {"dropout": 0.3, "dropout_file": True}})
    files, tiktoken = artifact_files(spec, trained["byte-level bpe"])
    listed = {entry["name"] for entry in json.loads(manifest(spec, {}, files, tiktoken))["files"]}
    assert DROPOUT_FILE in listed
    with_dropout = Tokenizer.from_str(files[DROPOUT_FILE].decode())
    assert with_dropout.model.dropout == pytest.approx(0.3)
    assert Tokenizer.from_str(files["tokenizer.json"].decode()).model.dropout is None
    text = " ".join(PROBE[:4])
    runs = {tuple(with_dropout.encode(text).ids) for _ in range(5)}  # tokenizers' own dropout: not seeded
    assert len(runs) > 1
    assert all(with_dropout.decode(list(ids)) == text for ids in runs)
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(files[DROPOUT_FILE].decode()))
    assert fast.decode(fast.encode(text)) == text


@pytest.mark.parametrize("name, sampling", [("byte-level bpe", {"dropout": 0.5, "dropout_file": True}),
                                            ("unigram", {"alpha": 0.05, "nbest_size": -1})])
def test_evaluation_never_samples(trained, name, sampling):
    raw = SPECS[name]
    metrics = []
    for spec in (resolve_spec(raw), resolve_spec({**raw, "sampling": sampling})):
        files, tiktoken = artifact_files(spec, trained[name])
        files["manifest.json"] = manifest(spec, {}, files, tiktoken)
        slow, _ = version_encoders(name, files, json.loads(files["manifest.json"]))
        metrics.append(measure(slow, PROBE))
    assert metrics[0] == metrics[1]


def test_the_new_job_form_takes_the_defaults_as_json():
    from starlette.datastructures import FormData

    from service.web.spec_form import spec_fields, spec_from_form

    form = FormData([("spec.vocab_size", "800"), ("spec.sampling", '{"dropout": 0.2, "seed": 4}')])
    assert resolve_spec(spec_from_form(spec_fields(), form)).sampling.dropout == 0.2
    with pytest.raises(InvalidInput) as caught:
        resolve_spec(spec_from_form(spec_fields(), FormData([("spec.sampling", "dropout 0.2")])))
    assert caught.value.field == "spec.sampling"
