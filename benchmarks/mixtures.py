"""Mixtures: what a language temperature does for the smallest language (issue 25, item 1).

Five languages of very different sizes, each a training corpus of U, U, 4U, 16U and 64U bytes
of UTF-8 (U = --unit-kb): Hindi and Arabic (FLORES-200 dev, first lines), Russian (FLORES-200
dev), Spanish and English (the Bible, /work/shared/corpora/bible). For each temperature τ the
documents are drawn as a job draws them (tokenmill.training.mixtures: `corpus_rates`, then
`Drawn` over the corpora) and byte-level BPE is trained at --vocab with `library: tokenmill`'s
engine (gpt2 regex). Each tokenizer is measured on the last --held-out lines of FLORES-200 dev
in every language (parallel sentences none of the trainings saw):

- fertility: tokens per word (words as the evaluation counts them, tokenmill.corpora.words);
- premium: a language's tokens for the same sentences over English's (1.0 = English's cost).

τ = 1 is the raw mix; lower τ flattens it (each language's share ∝ its size^τ), repeating the
small corpora (`max_repeats` unset: UniMax's cap is a separate knob). Also printed: each
language's share of the bytes actually trained on.

    .venv/bin/python -m benchmarks.mixtures --unit-kb 45 --vocab 8000 --temperatures 1 0.5 0.3 0
"""

import argparse
import time
import uuid
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

from tokenmill.corpora.words import count_words
from tokenmill.training.mixtures import Drawn, corpus_rates
from tokenmill.training.spec import MixtureSpec, TrainingSpec
from tokenmill.training.with_tokenmill import train_tokenmill

CORPORA = Path("/work/shared/corpora")
FLORES = CORPORA / "parallel_flores200_dev"
# language: (source file, size in units)
LANGUAGES = {
    "eng_Latn": (CORPORA / "bible" / "eng_Latn.txt", 64),
    "spa_Latn": (CORPORA / "bible" / "spa_Latn.txt", 16),
    "rus_Cyrl": (FLORES / "rus_Cyrl.txt", 4),
    "arb_Arab": (FLORES / "arb_Arab.txt", 1),
    "hin_Deva": (FLORES / "hin_Deva.txt", 1),
}


@dataclass
class Corpus:
    """What the mixture reads of a corpus, as the job's Corpus row has it."""

    language: str
    lines: list[str]

    @property
    def id(self) -> uuid.UUID:
        """Stable across runs: the draws, seeded by the spec's seed and the corpus id, are too."""
        return uuid.uuid5(uuid.NAMESPACE_URL, self.language)

    @property
    def name(self) -> str:
        return self.language

    @property
    def bytes(self) -> int:
        return sum(len(line.encode()) + 1 for line in self.lines)

    @property
    def characters(self) -> int:
        return sum(len(line) + 1 for line in self.lines)


def head_bytes(path: Path, limit: int, skip_last: int = 0) -> list[str]:
    """The first lines of a file that fit in `limit` bytes (leaving its last `skip_last` lines out)."""
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    lines = lines[:len(lines) - skip_last] if skip_last else lines
    kept, size = [], 0
    for line in lines:
        size += len(line.encode()) + 1
        if size > limit:
            break
        kept.append(line)
    if size <= limit:
        raise SystemExit(f"{path} holds fewer than {limit:,} bytes: lower --unit-kb")
    return kept


def held_out(language: str, lines: int) -> list[str]:
    return (FLORES / f"{language}.txt").read_text().splitlines()[-lines:]


def trained(corpora: list[Corpus], temperature: float, vocab: int) -> tuple[object, dict[str, float], float]:
    """The tokenizer trained on the mixture, each language's share of the trained bytes, seconds."""
    spec = TrainingSpec(library="tokenmill", vocab_size=vocab, pre_tokenizer="gpt2", byte_level=True,
                        special_tokens=["<|endoftext|>"], mixture=MixtureSpec(language_temperature=temperature))
    drawn = Drawn(corpora, corpus_rates(spec.mixture, corpora), False, spec.seed, {})
    drawn.begin()
    texts = chain.from_iterable(drawn.documents(corpus, corpus.lines) for corpus in corpora)
    started = time.perf_counter()
    tokenizer = train_tokenmill(spec, texts)
    seconds = time.perf_counter() - started
    drawn.end()
    shares = {language: part["share"] for language, part in drawn.record()["languages"].items()}
    return tokenizer, shares, seconds


def tokens(tokenizer, lines: list[str]) -> int:
    return sum(len(encoding.ids) for encoding in tokenizer.encode_batch(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit-kb", type=float, default=45, help="the smallest corpus's size (U), KB")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--held-out", type=int, default=200, help="FLORES lines kept out of training and measured")
    parser.add_argument("--temperatures", type=float, nargs="+", default=[1.0, 0.5, 0.3, 0.0])
    args = parser.parse_args()
    unit = int(args.unit_kb * 1000)
    corpora = [Corpus(language, head_bytes(path, units * unit, args.held_out if path.parent == FLORES else 0))
               for language, (path, units) in LANGUAGES.items()]
    tests = {language: held_out(language, args.held_out) for language in LANGUAGES}
    words = {language: sum(map(count_words, lines)) for language, lines in tests.items()}
    print(f"Training corpora (U = {unit:,} bytes): " + ", ".join(
        f"{c.language} {c.bytes:,} B ({units}U)" for c, (_, units) in zip(corpora, LANGUAGES.values())))
    print(f"Vocabulary {args.vocab:,}, byte-level BPE (gpt2 regex, library tokenmill); measured on the last "
          f"{args.held_out} lines of FLORES-200 dev per language.\n")
    languages = list(LANGUAGES)
    print("| τ | " + " | ".join(f"{language} share" for language in languages) + " | eng_Latn fertility | "
          + " | ".join(f"{language} premium" for language in languages[1:]) + " | train s |")
    print("|---" * (2 * len(languages) + 2) + "|")
    for temperature in args.temperatures:
        tokenizer, shares, seconds = trained(corpora, temperature, args.vocab)
        counts = {language: tokens(tokenizer, lines) for language, lines in tests.items()}
        premium = {language: counts[language] / counts["eng_Latn"] for language in languages}
        print(f"| {temperature:g} | " + " | ".join(f"{100 * shares[language]:.1f} %" for language in languages)
              + f" | {counts['eng_Latn'] / words['eng_Latn']:.3f} | "
              + " | ".join(f"{premium[language]:.2f}" for language in languages[1:]) + f" | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
