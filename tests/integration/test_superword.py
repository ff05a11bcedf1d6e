"""SuperBPE's second stage (tokenmill.jobs.extension.superword_files): merges across whitespace after
stage 1's, whose tokens keep their ids; the files load in tokenizers and tiktoken with the same ids."""

import base64
import json

import tiktoken
from tokenizers import Tokenizer

from tests.conftest import make_team
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.jobs.extension import superword_files
from tokenmill.training.counting.merge import cost
from tokenmill.training.patterns import SUPERWORD_SPLIT
from tokenmill.training.spec import resolve_spec

SPEC = {"library": "tokenmill", "vocab_size": 1400, "superword": {"transition_vocab_size": 1000}}


def english_corpus(sessionmaker, store):
    """800 FLORES lines of English, a corpus of a new team."""
    team, _ = make_team(sessionmaker)
    texts = flores_lines(997, languages=("eng_Latn",))[:800]
    return ingest_corpus(sessionmaker, store, team, CorpusFields("en", "news", "eng_Latn"),
                         ["\n".join(texts).encode()], max_bytes=10**8, max_line_bytes=10**6)


def test_superword_merges_cross_whitespace_and_keep_stage_one(sessionmaker, store):
    corpus = english_corpus(sessionmaker, store)
    spec = resolve_spec(SPEC)
    trained = superword_files(spec, store, [corpus], lambda *a, **k: None, {"job_id": "x"}, regex_seconds=10)
    manifest = json.loads(trained.files["manifest.json"])
    assert manifest["tiktoken"]["pat_str"] == SUPERWORD_SPLIT
    info = manifest["lineage"]["superword"]
    assert info["transition_vocab_size"] == 1000 and 0 < info["merges_added"] <= 400
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in trained.files["tokenizer.tiktoken"].splitlines())}
    superwords = [token for token, rank in ranks.items() if rank >= 1000 and b" " in token.strip(b" ")]
    assert superwords, "no merge crossed a space"
    encoding = tiktoken.Encoding("sw", pat_str=SUPERWORD_SPLIT, mergeable_ranks=ranks,
                                 special_tokens=manifest["tiktoken"]["special_tokens"])
    tokenizer = Tokenizer.from_str(trained.files["tokenizer.json"].decode())
    held_out = flores_lines(997, languages=("eng_Latn",))[900]
    assert tokenizer.encode(held_out, add_special_tokens=False).ids == encoding.encode(held_out)
    assert encoding.decode(encoding.encode(held_out)) == held_out


def test_superword_merges_on_mixed_text_are_each_what_byte_pair_encoding_makes_of_their_bytes(sessionmaker, store):
    # Code, man pages and prose: stage 1's regex cuts where byte-pair encoding of a whole span by
    # rank would not (an apostrophe, digits after letters). Learning from spans segmented by that
    # regex made tokens the files' encoding can never produce, and the version was refused.
    from tests.services import FIXTURES

    team, _ = make_team(sessionmaker)
    text = b"".join((FIXTURES / folder / name).read_bytes()[:300_000] for folder, name in (
        ("code", "python.txt"), ("manpages", "eng_Latn.txt"), ("fortunes", "eng_Latn.txt")))
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("mixed", "mixed", "eng_Latn"), [text],
                           max_bytes=10**8, max_line_bytes=10**6)
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 2000, "superword": {"transition_vocab_size": 1600}})
    trained = superword_files(spec, store, [corpus], lambda *a, **k: None, {}, regex_seconds=10)
    ranks = {base64.b64decode(t): int(r) for t, r in (line.split() for line in trained.files["tokenizer.tiktoken"].splitlines())}
    encoding = tiktoken.Encoding("sw", pat_str=SUPERWORD_SPLIT, mergeable_ranks=ranks, special_tokens={})
    for token, rank in ranks.items():
        if rank >= 1600:
            assert encoding.encode_single_token(token) == rank and len(encoding._encode_single_piece(token)) == 1


def test_spans_past_the_learners_budget_are_pruned_to_fit_and_the_lineage_says_how(sessionmaker, store):
    corpus = english_corpus(sessionmaker, store)
    spec = resolve_spec(SPEC)
    roomy = json.loads(superword_files(spec, store, [corpus], lambda *a, **k: None, {}, regex_seconds=10)
                       .files["manifest.json"])["lineage"]
    squeezed = json.loads(superword_files(spec, store, [corpus], lambda *a, **k: None, {}, regex_seconds=10,
                                          budget=cost(12, 48)).files["manifest.json"])["lineage"]
    assert roomy["pruned"]["threshold"] == 2 and not roomy["pruned"]["raised"]  # spans seen once are never kept
    pruned = squeezed["pruned"]
    assert pruned["raised"] and pruned["threshold"] > 2 and pruned["pieces_kept"] < roomy["pruned"]["pieces_kept"]
    assert squeezed["superword"]["spans"] == pruned["pieces_kept"]
