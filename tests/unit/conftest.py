"""The compiled kernels' tests, and running them without numba's JIT.

The `kernels` marker is on every test of the modules below: the tests of the compiled kernels (the
merge learner, the preset splitter and its piece table, the word cache, Unigram Viterbi, spelling,
words, metrics and UTF-8) and the property tests comparing them with their plain-Python references.
`make test-kernels-nojit` runs them with NUMBA_DISABLE_JIT=1, the kernels as plain Python, but for
those marked slow or `large` (a corpus, every code point, tens of thousands of words: minutes as
Python, where the JIT takes seconds). Then the numba intrinsics the kernels call, which numba cannot
run as Python, are replaced for the whole session by Python functions of the same rule (below).
"""

from pathlib import Path

import numba
import numpy as np
import pytest

KERNEL_MODULES = {
    "test_merge_learner",
    "test_splitter",  # and the piece table
    "test_word_cache",
    "test_unigram",
    "test_spelling",
    "test_words",
    "test_metrics",
    "test_training_kernels_against_references",
    "test_evaluation_kernels_against_references",  # and UTF-8
}


def pytest_configure(config):
    config.addinivalue_line("markers", "kernels: a test of a compiled kernel, run without the JIT too by "
                                       "`make test-kernels-nojit` unless slow or large")
    config.addinivalue_line("markers", "large: a kernel test on a large input, tens of seconds or more without the "
                                       "JIT: left out of `make test-kernels-nojit`")
    if numba.config.DISABLE_JIT:
        # As Python, the kernels' hashes overflow numpy scalars, which warns (compiled code wraps silently).
        config.addinivalue_line("filterwarnings", "ignore:overflow encountered:RuntimeWarning")
        from tokenmill.training import merge_learner
        from tokenmill.training.splitting import piece_table

        patch = pytest.MonkeyPatch()
        config.add_cleanup(patch.undo)
        patch.setattr(piece_table, "_word", word)
        patch.setattr(piece_table, "_prefetch", prefetch)
        patch.setattr(merge_learner, "_prefetch", prefetch)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.parent == Path(__file__).parent and item.path.stem in KERNEL_MODULES:
            item.add_marker(pytest.mark.kernels)


def word(values: np.ndarray, index: int) -> np.uint64:
    """piece_table._word: the 8 bytes of a uint8 array from `index` on as one little-endian number.
    (Compiled, a read past either end of the array goes unnoticed; here it raises.)"""
    eight = values[max(index, 0):index + 8]
    if index < 0 or len(eight) < 8:
        raise IndexError(f"_word reads 8 bytes from {index} of {len(values)}")
    return eight.view("<u8")[0]


def prefetch(values: np.ndarray, index: int) -> None:
    """merge_learner._prefetch and piece_table._prefetch: a hint to the CPU's caches, nothing else."""
