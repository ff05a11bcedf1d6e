"""SuperBPE's second stage (tokenmill.jobs.extension.superword_files): merges across whitespace after
stage 1's, whose tokens keep their ids; the files load in tokenizers and tiktoken with the same ids."""

import base64
import json

import tiktoken
from tokenizers import Tokenizer

from tests.conftest import make_team
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.jobs.extension import SUPERWORD_SPLIT, superword_files
from tokenmill.training.spec import resolve_spec


def test_superword_merges_cross_whitespace_and_keep_stage_one(sessionmaker, store):
    team, _ = make_team(sessionmaker)
    texts = flores_lines(997, languages=("eng_Latn",))[:800]
    corpus = ingest_corpus(sessionmaker, store, team, CorpusFields("en", "news", "eng_Latn"),
                           ["\n".join(texts).encode()], max_bytes=10**8, max_line_bytes=10**6)
    spec = resolve_spec({"library": "tokenmill", "vocab_size": 1400, "superword": {"transition_vocab_size": 1000}})
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
