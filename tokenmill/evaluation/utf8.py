"""UTF-8 as the compiled kernels read it: how many bytes a sequence takes, by its first byte.

A table, not a compiled function: numba freezes a global array into the code that reads it,
so kernels of several modules can share it, where a compiled function of another module would
go stale in their on-disk caches (tests/unit/test_compiled.py). Continuation bytes (0x80-0xBF)
never start a sequence in valid UTF-8; they read as 2, as the kernels' old inline rule did.
"""

import numpy as np

_LEADS = np.arange(256)
SEQUENCE_BYTES = np.where(_LEADS < 0x80, 1, np.where(_LEADS < 0xE0, 2, np.where(_LEADS < 0xF0, 3, 4))).astype(np.int64)
SEQUENCE_BYTES.flags.writeable = False
