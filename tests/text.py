"""Real text for tests: lines of the FLORES-200 parallel corpus in several scripts."""

from tests.services import FIXTURES

FLORES = FIXTURES / "parallel_flores200_dev"
MIXED_LANGUAGES = ("eng_Latn", "spa_Latn", "zho_Hans", "arb_Arab", "rus_Cyrl")


def flores_lines(n: int = 300, offset: int = 0, languages: tuple[str, ...] = MIXED_LANGUAGES) -> list[str]:
    """Lines offset..offset+n of each language's file, language after language."""
    out = []
    for language in languages:
        out += (FLORES / f"{language}.txt").read_text().splitlines()[offset:offset + n]
    return out
