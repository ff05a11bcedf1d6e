"""The API's reference encodes (tiktoken alone, no evaluation kernels) give the evaluation encoders' ids and spans."""

import random
import subprocess
import sys

import pytest

from tests.combinations import TORTURE
from tokenmill.evaluation.encoders import reference_encoder
from tokenmill.evaluation.references import REFERENCE_NAMES
from tokenmill.playground.encode import encode_with_reference

ALPHABET = "ab Z1 \t\n👋东京ïé\u0301🧑‍🤝‍🧑"


@pytest.mark.parametrize("name", REFERENCE_NAMES)
def test_ids_and_spans_equal_the_engine(name):
    rng = random.Random(7)
    texts = [*TORTURE, *("".join(rng.choice(ALPHABET) for _ in range(40)) for _ in range(100))]
    engine = reference_encoder(name)
    for text in texts:
        ids, spans = engine.encode_batch([text]).line(0)
        encoded = encode_with_reference(name, text)
        assert encoded["ids"] == list(ids)
        assert encoded["offsets"] == [list(span) for span in spans], text


def test_the_api_imports_no_evaluation_engine():
    probe = "import sys, service.app; print(sorted(m for m in ('numba', 'tokenmill.evaluation.measuring', 'tokenmill.evaluation.metrics') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
