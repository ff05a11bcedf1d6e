"""What a version costs, next to GPT-2, cl100k_base and o200k_base (the first seed article's bill).

Two kinds of sections. From the stored evaluations (the latest per corpus, as
`tokenmill.evaluation.reports` reads them, references restricted to the corpora the version was
evaluated on): the language tax (premium per parallel group, characters per token per
language), the continued-word rate per language, and the ghost tokens (vocabulary entries
seen fewer than `token_counts.CLIP` times in all those corpora, from the clipped per-id counts
each evaluation keeps). From small fixed texts (`tokenmill.playground.cost_probes`): numbers, indentation,
the trailing space and words in pieces, encoded by the version's own tokenizer in the
sandbox (its regex may be catastrophic) and by the references in this process (tiktoken's
fixed patterns are safe). Versions are immutable, so a version's probe and vocabulary are kept
for the next report, in a small cache; a failed probe is reported, not kept.

Subjects are keyed "version", "gpt2", "cl100k_base", "o200k_base" in every section.
"""

import threading
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar, cast

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from tokenmill.errors import TokenmillError
from tokenmill.evaluation.references import REFERENCE_NAMES, load_reference
from tokenmill.evaluation.reports import Subject, latest_evaluations, pivot_language, premium_details, subject_of
from tokenmill.evaluation.token_counts import CLIP, combined_counts
from tokenmill.formats.tiktoken_format import BYTE_DECODER
from tokenmill.models import Corpus, Evaluation, Team, TokenizerVersion
from tokenmill.playground.cost_probes import probe
from tokenmill.playground.encode import encode_with_reference, encode_with_version
from tokenmill.store import ObjectStore
from tokenmill.versions.diff import readable_token
from tokenmill.versions.registry import load_tokenizer, version_file

VERSION = "version"
ORDER = (VERSION, *REFERENCE_NAMES)
GHOSTS_LISTED = 200  # the version's learned ghosts listed; the references list a few examples
REFERENCE_GHOSTS_LISTED = 20
_KEPT = 16  # versions whose probe and vocabulary stay cached

Pair = tuple[Evaluation, Corpus]


@dataclass(frozen=True)
class Vocabulary:
    """What the ghost count needs of a vocabulary: ids never produced in evaluation (special or
    unused), ids of the base alphabet (single bytes or characters), and how to show an id."""

    excluded: np.ndarray  # bool per id
    base: np.ndarray  # bool per id
    token: Callable[[int], str]  # how an id is shown

    @property
    def size(self) -> int:
        return len(self.excluded)


def combine(measured: dict[str, Any], probed: dict[str, Any]) -> dict[str, Any]:
    """The report from its two halves: the probes' sections per subject, the words next to the
    stored continued-word rate."""
    probes = probed["probes"]
    measured = dict(measured)
    continued = measured.pop("continued_word_rate")
    return {
        **measured,
        "numbers": {key: {"items": p["numbers"], "digit_grouping": p["digit_grouping"]} for key, p in probes.items()},
        "indentation": {key: p["indentation"] for key, p in probes.items()},
        "trailing_space": {key: p["trailing_space"] for key, p in probes.items()},
        "letters_hidden": {"words": {key: {"items": p["words"], "split_share": p["split_share"]} for key, p in probes.items()},
                           "continued_word_rate": continued},
        "unavailable": probed["unavailable"],
    }


def subjects(row: TokenizerVersion) -> list[dict[str, Any]]:
    return [{"key": VERSION, "kind": "version", "label": f"{row.name} v{row.version}", "vocab_size": row.vocab_size}] + [
        {"key": name, "kind": "reference", "label": name, "vocab_size": load_reference(name).n_vocab}
        for name in REFERENCE_NAMES]


def measured_costs(session: Session, store: ObjectStore, team: Team, row: TokenizerVersion,
                   detailed: bool = False) -> dict[str, Any]:
    """The sections read from stored evaluations: language tax, continued words, ghost tokens.
    Kept until the team's evaluations change (reading every evaluation's token counts is the
    report's cost: a report asked for in a loop must not pay it each time). `detailed` (the
    dashboard's view) adds the language tax's tokens and measures (see `language_tax`)."""
    key = ("measured" + (" detailed" if detailed else ""), row.id, evaluations_stamp(session, team))
    return _cached(key, lambda: _measured_costs(session, store, team, row, detailed))


def evaluations_stamp(session: Session, team: Team) -> str:
    """What changes when the team's evaluations do (one is added, or a corpus deleted with its own)."""
    count, newest = session.execute(
        select(func.count(Evaluation.id), func.max(Evaluation.created_at)).where(Evaluation.team_id == team.id)
    ).one()
    return f"{count}:{newest}"


def _measured_costs(session: Session, store: ObjectStore, team: Team, row: TokenizerVersion,
                    detailed: bool) -> dict[str, Any]:
    pairs = _evaluated_together(latest_evaluations(session, team, [row.id]), row.id)
    by_subject = _by_subject(pairs)
    corpora = sorted({c.id: c for _, c in pairs}.values(), key=lambda c: (c.domain, c.language, c.name))
    ghosts = {VERSION: ghost_tokens(by_subject[VERSION], len(corpora), version_vocabulary(store, row), GHOSTS_LISTED)}
    for name in REFERENCE_NAMES:
        ghosts[name] = ghost_tokens(by_subject[name], len(corpora), reference_vocabulary(name), REFERENCE_GHOSTS_LISTED)
    return {
        "name": row.name, "version": row.version, "subjects": subjects(row),
        "corpora": [{"id": str(c.id), "name": c.name, "domain": c.domain, "language": c.language,
                     "parallel_group": c.parallel_group} for c in corpora],
        "language_tax": language_tax(pairs, detailed),
        "continued_word_rate": per_language(by_subject, "continued_word_rate"),
        "ghost_tokens": {"clip": CLIP, "subjects": ghosts},
    }


def subject_key(subject: Subject) -> str:
    return VERSION if subject[0] == "version" else subject[1]


def _by_subject(pairs: list[Pair]) -> defaultdict[str, list[Pair]]:
    by_subject: defaultdict[str, list[Pair]] = defaultdict(list)
    for evaluation, corpus in pairs:
        by_subject[subject_key(subject_of(evaluation))].append((evaluation, corpus))
    return by_subject


def _evaluated_together(pairs: list[Pair], version_id: uuid.UUID) -> list[Pair]:
    """The version's evaluations, and the references' on the same corpora only."""
    mine = {corpus.id for evaluation, corpus in pairs if evaluation.version_id == version_id}
    return [(e, c) for e, c in pairs if c.id in mine]


# ---- from the stored evaluations -------------------------------------------------------------

def language_tax(pairs: list[Pair], detailed: bool = False) -> dict[str, Any]:
    """Premium of each language of each parallel group per subject, and characters per token per language.

    `detailed` adds the corpus-level premium of languages whose lines do not align with the pivot's
    and, per language, "tokens" (per subject) and "measure" (line-aligned or corpus-level)."""
    details = premium_details(pairs, corpus_level=detailed)
    by_corpus: dict[uuid.UUID, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (subject, corpus_id), detail in details.items():
        by_corpus[corpus_id][subject_key(subject)] = detail
    groups: dict[str, dict[str, Corpus]] = defaultdict(dict)
    for _, corpus in pairs:
        if corpus.parallel_group:
            groups[corpus.parallel_group][corpus.language] = corpus
    out = []
    for group, languages in sorted(groups.items()):
        pivot = next((lang for lang in pivot_language(group) if lang in languages), None)
        order = sorted(languages, key=lambda lang: (lang != pivot, lang))
        rows: list[dict[str, Any]] = []
        for lang in order:
            measured = by_corpus.get(languages[lang].id, {})
            rows.append({"language": lang, "corpus_id": str(languages[lang].id), "corpus": languages[lang].name,
                         "premium": _ordered({key: d["premium"] for key, d in measured.items()})})
            if detailed:
                rows[-1]["tokens"] = _ordered({key: d["tokens"] for key, d in measured.items()})
                rows[-1]["measure"] = next((str(d["measure"]) for d in measured.values()), None)
        out.append({"group": group, "pivot": pivot, "languages": rows})
    return {"groups": out, "chars_per_token": per_language(_by_subject(pairs), "chars_per_token")}


def per_language(by_subject: dict[str, list[Pair]], metric: str) -> list[dict[str, Any]]:
    """One row per language: the metric over all its corpora per subject, weighted as a micro average
    (characters per token: characters / tokens; a rate over words: continued words / words)."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0.0]))
    for key, pairs in by_subject.items():
        for evaluation, corpus in pairs:
            m = evaluation.metrics
            top, bottom = ((m["characters"], m["tokens"]) if metric == "chars_per_token"
                           else (m.get(metric, 0.0) * m["words"], m["words"]))
            cell = sums[corpus.language][key]
            cell[0] += top
            cell[1] += bottom
    return [{"language": language,
             "values": _ordered({key: (top / bottom if bottom else None) for key, (top, bottom) in cells.items()})}
            for language, cells in sorted(sums.items())]


def _ordered(values: dict[str, Any]) -> dict[str, Any]:
    """The version first, then the references in their usual order."""
    return {key: values[key] for key in ORDER if key in values}


def ghost_tokens(pairs: list[Pair], corpora: int, vocabulary: Vocabulary, listed: int) -> dict[str, Any]:
    """Entries of one subject's vocabulary seen fewer than CLIP times over its evaluated corpora."""
    packs = [e.metrics["token_counts"] for e, _ in pairs if e.metrics.get("token_counts")]
    counted = {"corpora": len(packs), "of_corpora": corpora,
               "tokens": sum(e.metrics["tokens"] for e, _ in pairs if e.metrics.get("token_counts"))}
    if not packs:
        return {**counted, "available": False}
    summary = ghost_summary(combined_counts(packs), vocabulary.excluded, vocabulary.base, listed)
    summary["listed"] = [{"id": i, "count": count, "token": vocabulary.token(i)} for i, count in summary["listed"]]
    return {**counted, "available": True, **summary}


def ghost_summary(counts: np.ndarray, excluded: np.ndarray, base: np.ndarray, listed: int) -> dict[str, Any]:
    """Counts of ids never seen and seen fewer than CLIP times, learned entries apart from the base
    alphabet, and the first `listed` learned ghosts: never-seen first, then by id (for BPE, an
    earlier merge: the most striking ghosts were frequent when the tokenizer was trained)."""
    size = min(len(counts), len(excluded))
    counts, excluded, base = counts[:size], excluded[:size], base[:size]
    considered = ~excluded
    never, rare, learned = considered & (counts == 0), considered & (counts < CLIP), considered & ~base
    ghosts = np.flatnonzero(rare & learned)
    ghosts = ghosts[np.lexsort((ghosts, counts[ghosts]))][:listed]
    entries = int(considered.sum())
    return {
        "entries": entries, "never": int(never.sum()), "rare": int(rare.sum()),
        "learned_never": int((never & learned).sum()), "learned_rare": int((rare & learned).sum()),
        "base_never": int((never & ~learned).sum()),
        "never_share": int(never.sum()) / entries if entries else 0.0,
        "rare_share": int(rare.sum()) / entries if entries else 0.0,
        "listed": [(int(i), int(counts[i])) for i in ghosts],
    }


# ---- vocabularies ----------------------------------------------------------------------------

# what ("vocabulary", "probe" or "measured"), the version's id, tokenizer.json's sha256 (or the evaluations' stamp)
CacheKey = tuple[str, uuid.UUID, str]
_CACHE: OrderedDict[CacheKey, object] = OrderedDict()
_CACHE_LOCK = threading.Lock()  # requests run in threads: two may look up or fill it at once
_T = TypeVar("_T")


def _cached(key: CacheKey, make: Callable[[], _T]) -> _T:
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return cast(_T, _CACHE[key])  # what `make` made for this key: a key's first part names its kind
    value = make()  # outside the lock: two requests may both make it, neither waits for the other's
    with _CACHE_LOCK:
        _CACHE[key] = value
        while len(_CACHE) > _KEPT * 3:  # a probe, a vocabulary and the measured sections per version
            _CACHE.popitem(last=False)
    return value


def version_vocabulary(store: ObjectStore, row: TokenizerVersion) -> Vocabulary:
    key = ("vocabulary", row.id, version_file(row, "tokenizer.json")["sha256"])
    return _cached(key, lambda: _version_vocabulary(store, row))


def _version_vocabulary(store: ObjectStore, row: TokenizerVersion) -> Vocabulary:
    tokenizer = load_tokenizer(store, row)  # parsed here, never run: encodes happen in the sandbox
    byte_level = bool(row.spec.get("byte_level"))
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    excluded, base = np.zeros(size, dtype=bool), np.zeros(size, dtype=bool)
    for i, added in tokenizer.get_added_tokens_decoder().items():
        if added.special and i < size:
            excluded[i] = True
    tokens = [""] * size
    for token, i in tokenizer.get_vocab(with_added_tokens=True).items():
        if i < size:
            tokens[i] = token
            base[i] = is_base_token(token, byte_level)
    return Vocabulary(excluded, base, lambda i: readable_token(tokens[i], byte_level))


def is_base_token(token: str, byte_level: bool) -> bool:
    """A single byte or character of the alphabet, as opposed to a learned merge."""
    if byte_level and all(ch in BYTE_DECODER for ch in token):
        return len(token) == 1
    if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
        return True  # a byte-fallback token
    for prefix in ("▁", "##"):
        if token.startswith(prefix) and len(token) > len(prefix):
            token = token[len(prefix):]
            break
    return len(token) <= 1


def warm_up() -> None:
    """Read the references' rank files and vocabularies now (about a second of this process's
    time, parsing them): at start, not inside the first request, which would hold every other
    request of the process meanwhile."""
    for name in REFERENCE_NAMES:
        reference_vocabulary(name)


@cache
def reference_vocabulary(name: str) -> Vocabulary:
    """GPT-2's, cl100k's or o200k's ranks, from tiktoken alone (the evaluation kernels stay out of
    the API process): special tokens and unused ranks apart, single bytes as the base."""
    enc = load_reference(name)
    ranks = enc._mergeable_ranks  # special tokens and unused ranks (between the two) stay at -1
    lengths = np.full(enc.n_vocab, -1, dtype=np.int64)
    lengths[np.fromiter(ranks.values(), np.int64, len(ranks))] = np.fromiter(map(len, ranks), np.int64, len(ranks))
    return Vocabulary(lengths < 0, lengths == 1, lambda i: enc.decode_single_token_bytes(i).decode("utf-8", "replace"))


# ---- from the fixed texts --------------------------------------------------------------------

def probed_costs(store: ObjectStore, row: TokenizerVersion) -> dict[str, Any]:
    """Numbers, indentation, the trailing space and words in pieces, per subject; a version whose
    encodes were cut short (or found the sandbox busy) is left out with the reason."""
    probes, unavailable = {}, {}
    try:
        probes[VERSION] = version_probe(store, row)
    except TokenmillError as exc:
        unavailable[VERSION] = exc.detail
    return {"probes": probes | dict(reference_probes()), "unavailable": unavailable}


def version_probe(store: ObjectStore, row: TokenizerVersion) -> dict[str, Any]:
    """The fixed texts through the version's tokenizer, one bounded sandbox encode each (the first
    failure ends the probe: a regex too slow on one short text is too slow on the others)."""
    key = ("probe", row.id, version_file(row, "tokenizer.json")["sha256"])
    return _cached(key, lambda: probe(lambda text: encode_with_version(store, row, text)["offsets"]))


@lru_cache(maxsize=1)
def reference_probes() -> tuple[tuple[str, dict[str, Any]], ...]:
    # Each probe runs its encodes before the next name is taken: the lambda's `name` is its own.
    return tuple((name, probe(lambda text: encode_with_reference(name, text)["offsets"]))  # noqa: B023
                 for name in REFERENCE_NAMES)
