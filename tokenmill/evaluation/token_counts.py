"""Per-id token counts of one evaluation, clipped and packed small enough for its `metrics` JSON.

The ghost tokens of a version (entries that never or almost never occur in the team's text)
are the ids whose count over all evaluated corpora stays below `CLIP`. Counts clipped at
`CLIP` still add up exactly for that question, since min(a + b, CLIP) = min(min(a, CLIP) +
min(b, CLIP), CLIP), so each evaluation keeps min(count, CLIP) per id: two bits an id, four
ids a byte (id i in bits 2·(i % 4) of byte i // 4), zlib-compressed and base64-encoded.

Stored under the key `token_counts` of the metrics as one string, "c3/<vocabulary size>/<data>"
(a string, not an object, so that the metrics stay a flat mapping of numbers and words). A
32,000-token vocabulary takes 3–9 kB, o200k's 200,019 ids 10–17 kB on real text; anything
over `MAX_CHARS` (a vocabulary past ~190,000 ids whose counts do not compress) is not kept,
and the report says the counts are missing.

Deliberately not handled: counts above `CLIP` (the metrics keep the distribution's
entropies; this only answers "seen fewer than CLIP times?"), and ids past the vocabulary
(added tokens the encoder numbers beyond it are never produced in evaluation).
"""

import base64
import zlib
from collections.abc import Iterable

import numpy as np

CLIP = 3  # ids seen 0, 1 or 2 times are told apart; 3 means "3 or more"
MAX_CHARS = 64 * 1024
_PREFIX = f"c{CLIP}"


def pack_counts(counts: np.ndarray) -> str | None:
    """The clipped counts of a vocabulary (`counts[i]` = occurrences of id i), packed; None if too large."""
    clipped = np.minimum(counts, CLIP).astype(np.uint8)
    padded = np.zeros(-(-len(clipped) // 4) * 4, dtype=np.uint8)
    padded[:len(clipped)] = clipped
    quads = padded.reshape(-1, 4)
    packed = quads[:, 0] | (quads[:, 1] << 2) | (quads[:, 2] << 4) | (quads[:, 3] << 6)
    data = base64.b64encode(zlib.compress(packed.tobytes(), 6)).decode("ascii")
    if len(data) > MAX_CHARS:
        return None
    return f"{_PREFIX}/{len(clipped)}/{data}"


def unpack_counts(packed: str) -> np.ndarray:
    """The clipped counts `pack_counts` packed, one uint8 per id."""
    prefix, size, data = packed.split("/", 2)
    if prefix != _PREFIX:
        raise ValueError(f"token counts packed as {prefix!r}, not {_PREFIX!r}")
    raw = np.frombuffer(zlib.decompress(base64.b64decode(data)), dtype=np.uint8)
    quads = np.stack([(raw >> shift) & 3 for shift in (0, 2, 4, 6)], axis=1)
    return quads.reshape(-1)[:int(size)].copy()


def combined_counts(packs: Iterable[str]) -> np.ndarray:
    """min(total count, CLIP) per id over several evaluations of one tokenizer (as long as the
    shortest of them: ids past it were not counted everywhere)."""
    arrays = [unpack_counts(packed) for packed in packs]
    if not arrays:
        return np.zeros(0, dtype=np.uint8)
    size = min(map(len, arrays))
    total = np.zeros(size, dtype=np.int64)
    for counts in arrays:
        total += counts[:size]
    return np.minimum(total, CLIP).astype(np.uint8)
