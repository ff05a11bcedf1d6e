"""Seeded sampling of training documents (the spec's max_sentences), the same for both libraries."""

import random
from collections.abc import Iterable


def reservoir_sample(texts: Iterable[str], limit: int, seed: int) -> list[str]:
    """A uniform sample of at most `limit` texts, the same for the same seed (reservoir sampling).

    Every document is equally likely, so each corpus contributes in proportion to its size.
    """
    rng = random.Random(seed)
    kept: list[str] = []
    for index, text in enumerate(texts):
        if index < limit:
            kept.append(text)
        elif (slot := rng.randrange(index + 1)) < limit:
            kept[slot] = text
    return kept
