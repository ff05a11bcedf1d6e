"""Tokenizer versions: immutable, numbered per team and name, registered with all their files."""

import uuid
from collections import OrderedDict
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from tokenizers import Tokenizer

from tokenmill.errors import InvalidInput, NotFound
from tokenmill.models import Team, TokenizerVersion
from tokenmill.pagination import Page, paginate
from tokenmill.store import ObjectStore

MAX_VERSION = 2**31 - 1  # the column is a 32-bit integer


def next_version_number(session: Session, team_id: uuid.UUID, name: str) -> int:
    current = session.scalar(
        select(func.max(TokenizerVersion.version)).where(
            TokenizerVersion.team_id == team_id, TokenizerVersion.name == name
        )
    )
    return (current or 0) + 1


def list_names(session: Session, team: Team, page: Page) -> tuple[list[Any], int]:
    """The team's tokenizer names with their latest version number and count."""
    query = (
        select(
            TokenizerVersion.name,
            func.max(TokenizerVersion.version).label("latest"),
            func.count().label("versions"),
            func.max(TokenizerVersion.created_at).label("updated_at"),
        )
        .where(TokenizerVersion.team_id == team.id)
        .group_by(TokenizerVersion.name)
        .order_by(TokenizerVersion.name)
    )
    total = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.execute(query.limit(page.limit).offset(page.offset)).all()
    return [row._asdict() for row in rows], total


def list_versions(session: Session, team: Team, name: str, page: Page) -> tuple[list[TokenizerVersion], int]:
    query = (
        select(TokenizerVersion)
        .where(TokenizerVersion.team_id == team.id, TokenizerVersion.name == name)
        .order_by(TokenizerVersion.version.desc())
    )
    rows, total = paginate(session, query, page)
    if total == 0:
        raise NotFound(f"no tokenizer named {name!r}")
    return rows, total


def get_version(session: Session, team: Team, name: str, version: str | int) -> TokenizerVersion:
    """A version by number, or the newest for 'latest'; 404 otherwise."""
    query = select(TokenizerVersion).where(TokenizerVersion.team_id == team.id, TokenizerVersion.name == name)
    if str(version) == "latest":
        query = query.order_by(TokenizerVersion.version.desc()).limit(1)
    else:
        try:
            number = int(version)
        except ValueError:
            raise NotFound(f"no version {version!r} of {name!r}: use a number or 'latest'") from None
        if not 1 <= number <= MAX_VERSION:
            raise InvalidInput(f"'version' must be 'latest' or a number from 1 to {MAX_VERSION}", field="version")
        query = query.where(TokenizerVersion.version == number)
    row = session.scalar(query)
    if row is not None:
        return row
    exists = session.scalar(select(TokenizerVersion.id).where(TokenizerVersion.team_id == team.id,
                                                             TokenizerVersion.name == name).limit(1))
    if exists is None:
        raise NotFound(f"no tokenizer named {name!r} (GET /v1/tokenizers lists yours)")
    raise NotFound(f"tokenizer {name!r} has no version {version}")


NOTED_LINEAGE = ("training_data", "pruned", "superword")  # the parts of a version's lineage its notes read


def vocabulary_notes(spec: dict[str, Any], reached: int, lineage: dict[str, Any] | None = None) -> list[str]:
    """Why a version has fewer tokens than its spec asked for, if it has; what an extension added;
    what a mixture or deduplication trained on, and what fitting the counts in memory left out
    (the lineage's NOTED_LINEAGE)."""
    base = spec.get("base") or {}
    lineage = lineage or {}
    added = training_data_notes(lineage["training_data"]) if lineage.get("training_data") else []
    # A superword job counted in parts pruned twice: stage 1's pieces, then the spans.
    for stage, pruned in (("stage 1: ", (lineage.get("superword") or {}).get("stage1_pruned") or {}),
                          ("", lineage.get("pruned") or {})):
        if pruned.get("raised"):
            added.append(f"{stage}to fit the job's memory, only pieces seen {pruned['threshold']:,} times or more were "
                         f"learned from (min_frequency {pruned['min_frequency']}): {pruned['pieces_dropped']:,} distinct "
                         f"pieces, {100 * pruned['dropped_share']:.2f} % of all occurrences, left out")
    if base.get("vocab_size"):
        label = f"reference {base['reference']}" if base.get("reference") else f"{base.get('tokenizer')} v{base.get('version')}"
        unit = "pieces" if spec.get("library") == "sentencepiece" else "merges"
        added += [f"extends {label}: its {base['vocab_size']} tokens keep their ids; {reached - base['vocab_size']} "
                  f"{unit} learned on the training corpora follow them"]
    requested = spec.get("vocab_size", reached)
    if reached >= requested:
        return added
    how = "lower min_frequency or add text" if spec.get("library") != "sentencepiece" else "add text"
    return [*added, f"the vocabulary reached {reached} of the {requested} tokens asked for: the training corpora hold "
                    f"too little (or too repetitive) text to learn more; {how}"]


def training_data_notes(drawn: dict[str, Any]) -> list[str]:
    """What a job drew from its corpora: the bytes of each language, the duplicates it dropped."""
    notes = []
    if "duplicates_dropped" in drawn:
        notes.append(f"trained on each distinct document once: {drawn['duplicates_dropped']:,} duplicate documents dropped")
    languages = drawn.get("languages") or {}
    shares = ", ".join(f"{language} {100 * part['share']:.1f} %" for language, part in
                       sorted(languages.items(), key=lambda item: -item[1]["share"]))
    notes.append(f"trained on {sum(part['trained_bytes'] for part in languages.values()):,} bytes: {shares}")
    return notes


def version_file(version: TokenizerVersion, filename: str) -> dict[str, Any]:
    """The entry of one of the version's files."""
    for entry in version.files:
        if entry["name"] == filename:
            return entry
    raise NotFound(f"version {version.version} of {version.name!r} has no file {filename!r}")


def version_files(store: ObjectStore, version: TokenizerVersion) -> dict[str, bytes]:
    """Every file of a version, read from the store."""
    return {entry["name"]: store.get_bytes(entry["key"]) for entry in version.files}


_TOKENIZERS: OrderedDict[uuid.UUID, Tokenizer] = OrderedDict()
_TOKENIZERS_KEPT = 32


def load_tokenizer(store: ObjectStore, version: TokenizerVersion) -> Tokenizer:
    """A version's tokenizer.json, loaded (special-token text encodes as text); versions are
    immutable, so the most recent few stay loaded."""
    if version.id in _TOKENIZERS:
        _TOKENIZERS.move_to_end(version.id)
        return _TOKENIZERS[version.id]
    tokenizer = Tokenizer.from_str(store.get_bytes(version_file(version, "tokenizer.json")["key"]).decode())
    tokenizer.encode_special_tokens = True
    _TOKENIZERS[version.id] = tokenizer
    if len(_TOKENIZERS) > _TOKENIZERS_KEPT:
        _TOKENIZERS.popitem(last=False)
    return tokenizer
