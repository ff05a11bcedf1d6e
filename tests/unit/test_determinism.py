"""Same spec, corpus and seed → byte-identical files, across processes, wherever the lineage says so."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.combinations import COMBINATIONS
from tokenmill.training.spec import resolve_spec
from tokenmill.training.with_tokenizers import determinism

pytestmark = pytest.mark.slow  # each case trains in fresh processes

REPO = Path(__file__).resolve().parents[2]
TRAIN = """
import hashlib, json, sys
from tokenmill.training.spec import resolve_spec
from tokenmill.training.version_files import TrainedFiles
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.with_sentencepiece import train_sentencepiece
from tests.services import FIXTURES
lines = []
for lang in ("eng_Latn", "deu_Latn", "zho_Hans", "arb_Arab"):
    lines += (FIXTURES / "parallel_flores200_dev" / f"{lang}.txt").read_text().splitlines()[:200]
spec = resolve_spec(json.loads(sys.argv[1]))
if spec.library == "sentencepiece":
    data = train_sentencepiece(spec, lines).model
else:
    files, _ = artifact_files(spec, with_tokenizers.train(spec, lines))
    data = b"".join(files[name] for name in sorted(files))
print(hashlib.sha256(data).hexdigest())
"""


def digest(spec: dict, seed: str) -> str:
    import json

    env = {"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", TRAIN, json.dumps(spec)], cwd=REPO, env=env,
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


PROMISED = [c for c in COMBINATIONS if determinism(resolve_spec(c.spec))["deterministic"]]


@pytest.mark.parametrize("combination", PROMISED, ids=lambda c: c.name)
def test_promised_determinism_holds_across_processes(combination):
    spec = combination.spec
    assert digest(spec, "1") == digest(spec, "2")


def test_the_lineage_admits_what_is_not_deterministic():
    flagged = {c.name for c in COMBINATIONS if not determinism(resolve_spec(c.spec))["deterministic"]}
    assert flagged == {"bpe/tokenizers/char whitespace </w>", "wordpiece/tokenizers", "unigram/tokenizers",
                       "unigram/tokenizers + byte fallback"}


def test_byte_fallback_alphabet_cut_is_the_same_in_every_process():
    # A vocabulary too small for every character: the alphabet is cut by coverage, ties by code point.
    spec = {"vocab_size": 1500, "byte_level": False, "pre_tokenizer": "metaspace", "byte_fallback": True}
    assert len({digest(spec, seed) for seed in ("1", "2", "3")}) == 1
