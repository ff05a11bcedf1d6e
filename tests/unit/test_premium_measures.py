"""The premium of a parallel group, line-aligned or corpus-level: what the /v1 reports give (line-aligned
only) and what the dashboards ask for (both, each labelled), with the tokens it divides."""

import uuid

import pytest

from tokenmill.evaluation.reports import CORPUS_LEVEL, LINE_ALIGNED, premium_details, premiums
from tokenmill.models import Corpus, Evaluation
from tokenmill.playground.cost_report import language_tax


def corpus(language: str, lines: int, group: str | None = "flores") -> Corpus:
    return Corpus(id=uuid.uuid4(), name=f"{group}-{language}", domain="news", language=language, lines=lines,
                  parallel_group=group)


def measured(reference: str, tokens: dict[Corpus, int]) -> list[tuple[Evaluation, Corpus]]:
    return [(Evaluation(id=uuid.uuid4(), reference=reference, metrics={"tokens": n, "characters": 10 * n, "words": n}), c)
            for c, n in tokens.items()]


@pytest.fixture
def pairs():
    english, german, french, alone = corpus("eng_Latn", 300), corpus("deu_Latn", 300), corpus("fra_Latn", 150), \
        corpus("eng_Latn", 10, None)
    return {"en": english, "de": german, "fr": french}, measured("gpt2", {english: 1000, german: 1300, french: 700,
                                                                           alone: 50})


def test_line_aligned_corpora_get_the_premium_and_say_so(pairs):
    corpora, evaluated = pairs
    details = premium_details(evaluated)
    german = details[(("reference", "gpt2"), corpora["de"].id)]
    assert german == {"premium": 1.3, "tokens": 1300, "pivot_tokens": 1000, "pivot": "eng_Latn", "measure": LINE_ALIGNED}
    assert details[(("reference", "gpt2"), corpora["en"].id)]["premium"] == 1.0


def test_corpora_whose_lines_do_not_align_get_the_corpus_level_premium_only_when_asked(pairs):
    corpora, evaluated = pairs
    french = (("reference", "gpt2"), corpora["fr"].id)
    assert french not in premiums(evaluated)  # the /v1 reports: line-aligned only, as before
    detail = premium_details(evaluated, corpus_level=True)[french]
    assert detail["measure"] == CORPUS_LEVEL and detail["premium"] == pytest.approx(0.7)
    assert premiums(evaluated, corpus_level=True)[french] == pytest.approx(0.7)


def test_the_detailed_language_tax_carries_tokens_and_measures(pairs):
    _corpora, evaluated = pairs
    plain = language_tax(evaluated)["groups"][0]["languages"]
    assert [row["language"] for row in plain] == ["eng_Latn", "deu_Latn", "fra_Latn"]
    assert plain[2]["premium"] == {} and "measure" not in plain[2]  # the API's report is unchanged
    detailed = language_tax(evaluated, detailed=True)["groups"][0]["languages"]
    assert [row["measure"] for row in detailed] == [LINE_ALIGNED, LINE_ALIGNED, CORPUS_LEVEL]
    assert detailed[1]["tokens"] == {"gpt2": 1300} and detailed[2]["premium"] == {"gpt2": pytest.approx(0.7)}
