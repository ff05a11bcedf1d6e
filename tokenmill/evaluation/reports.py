"""Reading evaluations back: per version, per run, and the fertility matrix behind the dashboard.

The latest evaluation of each (subject, corpus) pair counts, where a subject is a version
or a reference tokenizer. Cells aggregate corpora by summing tokens and words (a micro
average: a large corpus weighs more). Parallel corpora (same `parallel_group`) get a
premium: tokens in the language / tokens in the pivot, where the pivot is English unless
the group is written `name@language`. The /v1 reports give it only where a corpus has as many
lines as its pivot (line-aligned: line i is the same content); the dashboards ask for the
corpus-level premium too (`corpus_level=True`), the same ratio of totals for corpora whose
lines do not align, as the seed article measures it, and say which is which. A version's
vocabulary-size curve is read back by `version_curve` (tokenmill.evaluation.measuring measures
it once per version).
"""

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tokenmill.evaluation.references import BASELINES, REFERENCE_NAMES
from tokenmill.models import Corpus, Evaluation, Team, TokenizerVersion

ENGLISH = ("eng_Latn", "en", "eng", "en_US", "en_GB", "English", "english")
LINE_ALIGNED = "line-aligned"  # as many lines as the pivot: line i is the same content in both
CORPUS_LEVEL = "corpus-level"  # lines that do not align: the ratio of the two corpora's totals

Subject = tuple[str, str]  # ("version", "<uuid>") or ("reference", "gpt2")


def premium(tokens: int, pivot_tokens: int) -> float:
    """The tokenization premium: tokens of a language / tokens of the pivot (Petrov et al. 2023,
    on a parallel corpus). An empty pivot gives 0.0, as every zero denominator in the metrics
    does: NaN is not valid JSON and would poison averages."""
    return tokens / pivot_tokens if pivot_tokens else 0.0


def pivot_language(group: str) -> tuple[str, ...]:
    """The language(s) a parallel group is measured against."""
    _, _, named = group.partition("@")
    return (named,) if named else ENGLISH


def subject_of(evaluation: Evaluation) -> Subject:
    if evaluation.version_id is not None:
        return ("version", str(evaluation.version_id))
    return ("reference", str(evaluation.reference))


def latest_evaluations(session: Session, team: Team, version_ids: list[uuid.UUID] | None = None,
                       references: tuple[str, ...] = REFERENCE_NAMES) -> list[tuple[Evaluation, Corpus]]:
    """The newest evaluation of every (subject, corpus) pair of the team."""
    query = (select(Evaluation, Corpus).join(Corpus, Corpus.id == Evaluation.corpus_id)
             .where(Evaluation.team_id == team.id).order_by(Evaluation.created_at))
    if version_ids is not None:
        query = query.where(Evaluation.version_id.in_(version_ids) | Evaluation.reference.in_(references))
    return _newest(session.execute(query))


def _newest(pairs: Iterable[tuple[Evaluation, Corpus]]) -> list[tuple[Evaluation, Corpus]]:
    """The last of each (subject, corpus) pair's evaluations, from pairs oldest first."""
    newest: dict[tuple[Subject, uuid.UUID], tuple[Evaluation, Corpus]] = {}
    for evaluation, corpus in pairs:
        newest[(subject_of(evaluation), corpus.id)] = (evaluation, corpus)
    return list(newest.values())


def _by_corpus(pair: tuple[Evaluation, Corpus]) -> tuple[str, str, str]:
    """The order reports list corpora in: domain, language, name."""
    corpus = pair[1]
    return corpus.domain, corpus.language, corpus.name


def premium_details(pairs: list[tuple[Evaluation, Corpus]],
                    corpus_level: bool = False) -> dict[tuple[Subject, uuid.UUID], dict[str, Any]]:
    """The premium of every evaluation on a parallel corpus whose pivot the same subject measured,
    with what it divides: {"premium", "tokens", "pivot_tokens", "pivot", "measure"}.

    A corpus with as many lines as its pivot is `LINE_ALIGNED` (line i is the same content). One
    with another count, whose ratio compares totals only, is `CORPUS_LEVEL` and left out unless
    `corpus_level` is asked for.
    """
    pivots: dict[tuple[Subject, str], dict[str, tuple[int, int]]] = defaultdict(dict)
    for evaluation, corpus in pairs:
        if corpus.parallel_group:
            group = pivots[(subject_of(evaluation), corpus.parallel_group)]
            group[corpus.language] = (evaluation.metrics["tokens"], corpus.lines)
    result = {}
    for evaluation, corpus in pairs:
        if not corpus.parallel_group:
            continue
        group = pivots[(subject_of(evaluation), corpus.parallel_group)]
        language = next((lang for lang in pivot_language(corpus.parallel_group) if lang in group), None)
        if language is None or not group[language][0]:
            continue
        pivot_tokens, pivot_lines = group[language]
        measure = LINE_ALIGNED if pivot_lines == corpus.lines else CORPUS_LEVEL
        if measure == CORPUS_LEVEL and not corpus_level:
            continue
        tokens = evaluation.metrics["tokens"]
        result[(subject_of(evaluation), corpus.id)] = {"premium": premium(tokens, pivot_tokens), "tokens": tokens,
                                                       "pivot_tokens": pivot_tokens, "pivot": language,
                                                       "measure": measure}
    return result


def premiums(pairs: list[tuple[Evaluation, Corpus]], corpus_level: bool = False) -> dict[tuple[Subject, uuid.UUID], float]:
    """The premium of every evaluation on a parallel corpus (see `premium_details`)."""
    return {key: detail["premium"] for key, detail in premium_details(pairs, corpus_level).items()}


def evaluation_out(evaluation: Evaluation, corpus: Corpus, premium_value: float | None) -> dict[str, Any]:
    metrics = dict(evaluation.metrics)
    if "engine" in metrics:  # evaluations measured before the key was renamed
        metrics["encoded_by"] = metrics.pop("engine")
    if premium_value is not None:
        metrics["premium"] = premium_value
    return {
        "id": str(evaluation.id),
        "corpus_id": str(corpus.id),
        "corpus": corpus.name,
        "domain": corpus.domain,
        "language": corpus.language,
        "parallel_group": corpus.parallel_group,
        "word_rule": evaluation.word_rule,
        "reference": evaluation.reference,
        "metrics": metrics,
        "created_at": evaluation.created_at.isoformat(),
    }


def version_evaluations(session: Session, team: Team, version: TokenizerVersion) -> list[dict[str, Any]]:
    """Metrics of one version per evaluation corpus, premium included where it applies."""
    pairs = latest_evaluations(session, team, [version.id], references=())
    extra = premiums(pairs)
    subject: Subject = ("version", str(version.id))
    return [evaluation_out(e, c, extra.get((subject, c.id))) for e, c in sorted(pairs, key=_by_corpus)]


def version_curve(session: Session, team: Team, version: TokenizerVersion) -> list[dict[str, Any]]:
    """A version's vocabulary-size curve as series to draw, each {"label", "corpora", "lines",
    "points"} (points: vocab_size, fertility, chars_per_token); empty without one (not BPE, or
    not evaluated yet). One series: the curve measured once for the version, on the first lines
    of the corpora it was evaluated on together, which each of those evaluations carries with
    its `vocab_curve_sample` (the newest such). For a version evaluated before curves were per
    version, one series per corpus, from each corpus's latest evaluation (which had its own)."""
    rows = session.execute(select(Evaluation, Corpus).join(Corpus, Corpus.id == Evaluation.corpus_id)
                           .where(Evaluation.team_id == team.id, Evaluation.version_id == version.id)
                           .order_by(Evaluation.created_at)).all()
    for evaluation, _ in reversed(rows):
        sample, points = evaluation.metrics.get("vocab_curve_sample"), evaluation.metrics.get("vocab_curve")
        if sample and points:
            corpora = f"{sample['corpora']} corpus" if sample["corpora"] == 1 else f"{sample['corpora']} corpora"
            return [{"label": f"{sample['lines']:,} lines of {corpora}", **sample, "points": points}]
    return [{"label": f"{corpus.name} ({corpus.language})", "corpora": 1, "lines": None,
             "points": evaluation.metrics["vocab_curve"]}
            for evaluation, corpus in sorted(_newest(rows), key=_by_corpus) if evaluation.metrics.get("vocab_curve")]


def has_version_curve(session: Session, version_id: uuid.UUID) -> bool:
    """Whether a version's curve has been measured (once per version: an evaluation carries it)."""
    return any("vocab_curve_sample" in metrics for metrics in
               session.scalars(select(Evaluation.metrics).where(Evaluation.version_id == version_id)))


def _cell(pairs: list[tuple[Evaluation, Corpus]]) -> dict[str, float | int]:
    tokens = sum(e.metrics["tokens"] for e, _ in pairs)
    words = sum(e.metrics["words"] for e, _ in pairs)
    characters = sum(e.metrics["characters"] for e, _ in pairs)
    return {"fertility": tokens / words if words else 0.0, "chars_per_token": characters / tokens if tokens else 0.0,
            "tokens": tokens, "words": words, "corpora": len(pairs)}


def version_label(version: TokenizerVersion) -> str:
    """How dashboards name a version; parity-aware ones say so, to be read beside plain BPE's."""
    return f"{version.name} v{version.version}" + (" (parity)" if version.spec.get("parity") else "")


def fertility_matrix(session: Session, team: Team, name: str | None = None, *, detailed: bool = False) -> dict[str, Any]:
    """Rows: versions (newest first) and references; columns: domains, and (domain, language) pairs.
    `detailed` (the dashboard's view) adds corpus-level premiums and, per row, "premium_detail":
    by group and language, what `premium_details` says of each premium."""
    query = select(TokenizerVersion).where(TokenizerVersion.team_id == team.id)
    if name:
        query = query.where(TokenizerVersion.name == name)
    versions = list(session.scalars(query.order_by(TokenizerVersion.name, TokenizerVersion.version.desc())))
    pairs = latest_evaluations(session, team, [v.id for v in versions], BASELINES)
    details = premium_details(pairs, corpus_level=detailed)
    by_subject: dict[Subject, list[tuple[Evaluation, Corpus]]] = defaultdict(list)
    for pair in pairs:
        by_subject[subject_of(pair[0])].append(pair)
    subjects: list[tuple[Subject, dict[str, Any]]] = [
        (("version", str(v.id)), {"kind": "version", "name": v.name, "version": v.version, "label": version_label(v),
                                  "vocab_size": v.vocab_size, "parity": bool(v.spec.get("parity"))})
        for v in versions
    ] + [(("reference", r), {"kind": "reference", "name": r, "version": None, "label": r, "vocab_size": None})
         for r in BASELINES]
    rows = []
    for subject, row in subjects:
        own = by_subject.get(subject, [])
        domains: dict[str, list[tuple[Evaluation, Corpus]]] = defaultdict(list)
        languages: dict[str, list[tuple[Evaluation, Corpus]]] = defaultdict(list)
        for evaluation, corpus in own:
            domains[corpus.domain].append((evaluation, corpus))
            languages[f"{corpus.domain}/{corpus.language}"].append((evaluation, corpus))
        parity: dict[str | None, dict[str, dict[str, Any]]] = defaultdict(dict)
        for _evaluation, corpus in own:
            if (subject, corpus.id) in details:
                parity[corpus.parallel_group][corpus.language] = details[(subject, corpus.id)]
        premium_by_group = {group: {lang: d["premium"] for lang, d in langs.items()} for group, langs in parity.items()}
        rows.append({**row, "domains": {d: _cell(p) for d, p in domains.items()},
                     "languages": {k: _cell(p) for k, p in languages.items()}, "premium": premium_by_group,
                     **({"premium_detail": dict(parity)} if detailed else {})})
    all_domains = sorted({c.domain for _, c in pairs})
    all_languages = sorted({f"{c.domain}/{c.language}" for _, c in pairs})
    return {"domains": all_domains, "languages": all_languages, "rows": rows}
