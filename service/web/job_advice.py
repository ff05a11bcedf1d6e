"""What the new-job form is about to ask for, said before it is submitted.

`advice` reads the form's spec and the corpora ticked to train on, and says in a few lines what
will happen: the vocabulary the text can hold (BPE and Unigram stop early on little text), how
text outside the alphabet is handled, whether parity applies, and where the chosen split cuts a
language's words below what merges can fix. Nothing is submitted: the same checks that refuse a
job run when it is.

The vocabulary estimate is rough, and says so: about 0.85 tokens per distinct word of a corpus
(its statistics), or 9·bytes^0.55 for text written without spaces (more than 12 characters a
"word") or a corpus whose statistics are not ready; summed over the corpora, so an upper bound
when they share a language. On FLORES-200 (one and four languages, Chinese), the demo Bible
excerpts, fortunes and Python code, byte-level BPE stopped within 0.8 to 1.3 times of it.

Deliberately not handled: custom split regexes (compiled and timed when the job is submitted,
not here) and the time a job will take.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.web.render import human_bytes
from tokenmill.errors import InvalidInput
from tokenmill.models import Corpus
from tokenmill.playground.split_floor import PATTERNS, corpus_cuts, is_notable
from tokenmill.store import ObjectStore
from tokenmill.training.spec import TrainingSpec, resolve_spec

TOKENS_PER_WORD = 0.85
SHORT_OF = 0.9  # a vocabulary above this share of the estimate will likely stop short


@dataclass(frozen=True)
class Advice:
    """One thing the form says: its kind (info, warn) and its text."""

    kind: str
    text: str
    key: str


def vocabulary_ceiling(corpora: Sequence[Corpus]) -> int:
    """About how many tokens BPE learns from these corpora before no pair repeats (see the module docstring)."""
    total = 0.0
    for corpus in corpora:
        distinct = (corpus.statistics or {}).get("distinct_words")
        spaced = corpus.words and corpus.characters / corpus.words <= 12
        total += TOKENS_PER_WORD * distinct if distinct and spaced else 9 * max(corpus.bytes, 1) ** 0.55
    return int(round(total, -2 if total > 1000 else -1))


def resolved(spec: dict[str, Any]) -> TrainingSpec | InvalidInput:
    """The spec as a job would resolve it (a custom regex left to the submission), or why it is refused."""
    try:
        return resolve_spec({k: v for k, v in spec.items() if k != "pre_tokenizer_regex"})
    except InvalidInput as exc:
        return exc


def advice(store: ObjectStore, spec: dict[str, Any], corpora: Sequence[Corpus]) -> list[Advice]:
    """What the form would start, and what to know about it."""
    chosen = resolved(spec)
    if isinstance(chosen, InvalidInput):
        return [Advice("warn", f"As it stands the job would be refused: {chosen.detail}", "refused")]
    notes = [summary(chosen, spec, corpora)]
    if not corpora:
        return [*notes, Advice("warn", "Tick at least one corpus to train on.", "corpora")]
    notes += vocabulary(chosen, corpora)
    notes += alphabet(chosen)
    notes += parity(chosen, corpora)
    notes += split(store, chosen, spec, corpora)
    return notes


def summary(chosen: TrainingSpec, spec: dict[str, Any], corpora: Sequence[Corpus]) -> Advice:
    how = "byte-level" if chosen.byte_level else "character-level" + (" with byte fallback" if chosen.byte_fallback else "")
    split_by = "a custom regex" if spec.get("pre_tokenizer_regex") else f"the {chosen.pre_tokenizer} split"
    size = sum(c.bytes for c in corpora)
    text = (f"{'Parity-aware ' if chosen.parity else ''}{how} {chosen.algorithm} by {chosen.library}, {split_by}, "
            f"{chosen.vocab_size:,} tokens, trained on {len(corpora)} {'corpus' if len(corpora) == 1 else 'corpora'} "
            f"({human_bytes(size)}).")
    return Advice("info", text[0].upper() + text[1:], "summary")


def vocabulary(chosen: TrainingSpec, corpora: Sequence[Corpus]) -> list[Advice]:
    ceiling = vocabulary_ceiling(corpora)
    size = human_bytes(sum(c.bytes for c in corpora))
    if chosen.vocab_size > SHORT_OF * ceiling:
        return [Advice("warn", f"A vocabulary of {chosen.vocab_size:,} on {size} will likely stop near {ceiling:,}: "
                               f"training ends when no pair occurs {chosen.min_frequency} times (a rough estimate "
                               "from the corpora's distinct words; the version's notes will say where it stopped). "
                               "Add text, or ask for fewer tokens.", "vocabulary")]
    return [Advice("info", f"{size} can hold about {ceiling:,} tokens: room for {chosen.vocab_size:,}.", "vocabulary")]


def alphabet(chosen: TrainingSpec) -> list[Advice]:
    if chosen.byte_level:
        return [Advice("info", "Byte-level: every text encodes, with no unknown token.", "alphabet")]
    if chosen.byte_fallback:
        return [Advice("info", f"Characters outside the {chosen.character_coverage:.2%} the alphabet covers are spelled "
                               "as byte tokens (<0xNN>), never unknown.", "alphabet")]
    return [Advice("warn", "Characters outside the alphabet become the unknown token, lost for good: byte_fallback "
                           "spells them as bytes instead.", "alphabet")]


def parity(chosen: TrainingSpec, corpora: Sequence[Corpus]) -> list[Advice]:
    groups = {c.parallel_group for c in corpora}
    languages = sorted({c.language for c in corpora})
    one_group = len(groups) == 1 and None not in groups and len(languages) >= 2
    if chosen.parity and not one_group:
        return [Advice("warn", "parity needs the training corpora to be one parallel group in two or more languages; "
                               f"these are in {', '.join(sorted(g or 'no group' for g in groups))}.", "parity")]
    if chosen.parity:
        return [Advice("info", f"Parity: each merge goes to the language of {next(iter(groups))} that compresses worst "
                               f"({', '.join(languages)}), on its first {chosen.parity_dev_lines} lines.", "parity")]
    if one_group and chosen.algorithm == "bpe" and chosen.byte_level:
        return [Advice("info", f"These corpora are the parallel group {next(iter(groups))} in {len(languages)} "
                               "languages: parity would give them closer token counts at the same vocabulary.", "parity")]
    return []


def split(store: ObjectStore, chosen: TrainingSpec, spec: dict[str, Any], corpora: Sequence[Corpus]) -> list[Advice]:
    pattern = None if spec.get("pre_tokenizer_regex") else chosen.pre_tokenizer
    if pattern not in PATTERNS:
        return []
    notes = []
    for corpus in {c.language: c for c in corpora}.values():
        cuts = corpus_cuts(store, corpus, [pattern])[pattern]
        if is_notable(cuts):
            notes.append(Advice("warn", f"The {pattern} split cuts {cuts['cut_share']:.0%} of {corpus.language} words "
                                        f"{cuts['cut_at'][0]}: {cuts['pieces_per_word']:.1f} pieces per word, a floor no "
                                        "merge can pass; the o200k split keeps marks with their letters.", "split"))
    return notes
