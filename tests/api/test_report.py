"""GET /v1/tokenizers/{name}/versions/{v}/report on a tiny trained version whose evaluations are
written here, numbers chosen by hand: premiums, characters per token, continued words and ghost
tokens must come out as worked out below; the fixed texts as the version's own tokenizer and
tiktoken cut them."""


import numpy as np
import pytest
from sqlalchemy import select

from tests.conftest import make_team
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.corpora.ingest import CorpusFields, ingest_corpus
from tokenmill.db import transaction
from tokenmill.errors import InvalidInput
from tokenmill.evaluation.references import load_reference
from tokenmill.evaluation.token_counts import pack_counts
from tokenmill.models import Evaluation
from tokenmill.playground import cost_report
from tokenmill.playground.cost_probes import INDENTS, NUMBERS, TRAILING, UNINDENTED, WORDS
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec

LIMITS = {"max_bytes": 10**8, "max_line_bytes": 10**6}
NAME = "priced"
URL = f"/v1/tokenizers/{NAME}/versions/1/report"
# Per corpus: tokens, words, characters, continued_word_rate, for the version and the references.
NUMBERS_BY_HAND = {
    "version": {"en": (1000, 800, 4000, 0.10), "es": (1300, 780, 3900, 0.30), "py": (2000, 600, 5000, 0.50)},
    "gpt2": {"en": (900, 800, 4000, 0.05), "es": (1500, 780, 3900, 0.40), "py": (2500, 600, 5000, 0.60)},
    "cl100k_base": {"en": (800, 800, 4000, 0.04), "es": (1000, 780, 3900, 0.20), "py": (1500, 600, 5000, 0.30)},
    "o200k_base": {"en": (700, 800, 4000, 0.03), "es": (728, 780, 3900, 0.10)},  # not evaluated on "py"
}


def metrics(tokens, words, characters, continued, counts=None) -> dict:
    out = {"tokens": tokens, "words": words, "characters": characters, "bytes": characters,
           "fertility": tokens / words, "chars_per_token": characters / tokens, "continued_word_rate": continued,
           # What the version page's metrics table shows besides (not read by the report).
           "bytes_per_token": characters / tokens, "unk_rate": 0.0, "byte_fallback_rate": 0.0, "roundtrip_rate": 1.0,
           "vocab_utilization": 0.5, "shannon_efficiency": 0.5, "renyi_efficiency": 0.5}
    if counts is not None:
        out["token_counts"] = pack_counts(counts)
    return out


@pytest.fixture(scope="module")
def priced(sessionmaker, store):
    """A team with parallel English/Spanish news and some Python, version 1 of "priced", and
    evaluations of it and of the references written by hand."""
    team, key = make_team(sessionmaker)
    english, spanish = flores_lines(60, languages=("eng_Latn",)), flores_lines(60, languages=("spa_Latn",))
    corpora = {
        "en": ingest_corpus(sessionmaker, store, team, CorpusFields("flores-en", "news", "eng_Latn", parallel_group="g"),
                            ["\n".join(english).encode()], **LIMITS),
        "es": ingest_corpus(sessionmaker, store, team, CorpusFields("flores-es", "news", "spa_Latn", parallel_group="g"),
                            ["\n".join(spanish).encode()], **LIMITS),
        "py": ingest_corpus(sessionmaker, store, team, CorpusFields("python", "code", "python"),
                            [b"def f(x):\n    return x\n" * 20], **LIMITS),
    }
    spec = resolve_spec({"vocab_size": 400})
    tokenizer = with_tokenizers.train(spec, english + spanish)
    files, _ = artifact_files(spec, tokenizer)
    row = add_version(sessionmaker, store, team, NAME, spec, files, tokenizer.get_vocab_size())
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    special = tokenizer.token_to_id("<|endoftext|>")
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    learned = sorted(i for token, i in vocab.items() if len(token) > 1 and i != special)
    g1, g2, g3, g4 = learned[:4]
    byte = vocab["Ã"]  # a base byte: never seen anywhere below
    counts = {corpus: np.full(size, 7) for corpus in corpora}
    for corpus, zeros in {"en": {g1: 0, g2: 1, g3: 0, g4: 2}, "es": {g1: 0, g2: 1, g3: 3, g4: 0},
                          "py": {g1: 0, g2: 0, g3: 0, g4: 0}}.items():
        for token_id, count in zeros.items():
            counts[corpus][token_id] = count
        counts[corpus][[special, byte]] = 0
    gpt2 = np.zeros(load_reference("gpt2").n_vocab, dtype=np.int64)
    gpt2[:10] = 5
    rows = []
    for subject, by_corpus in NUMBERS_BY_HAND.items():
        for corpus, numbers in by_corpus.items():
            if subject == "version":
                extra, owner = counts[corpus], {"version_id": row.id}
            else:
                extra, owner = (gpt2 if subject == "gpt2" else None), {"reference": subject}
            rows.append(Evaluation(team_id=team.id, corpus_id=corpora[corpus].id, word_rule="whitespace",
                                   metrics=metrics(*numbers, counts=extra), **owner))
    with transaction(sessionmaker) as session:
        session.add_all(rows)
    return {"key": key, "team": team, "row": row, "tokenizer": tokenizer, "corpora": corpora,
            "ghosts": (g1, g2, g3, g4, byte), "special": special}


@pytest.fixture
def client(app_client, priced):
    app_client.headers["Authorization"] = f"Bearer {priced['key']}"
    yield app_client
    app_client.headers.pop("Authorization", None)


@pytest.fixture(scope="module")
def report(app_client, priced):
    response = app_client.get(URL, headers={"Authorization": f"Bearer {priced['key']}"})
    assert response.status_code == 200, response.text
    return response.json()


def test_every_section_is_there_for_the_version_and_the_three_references(report):
    keys = ["version", "gpt2", "cl100k_base", "o200k_base"]
    assert [s["key"] for s in report["subjects"]] == keys
    assert report["subjects"][0]["label"] == f"{NAME} v1"
    for section in ("numbers", "indentation", "trailing_space"):
        assert list(report[section]) == keys, section
    assert list(report["letters_hidden"]["words"]) == keys
    assert list(report["ghost_tokens"]["subjects"]) == keys
    assert report["unavailable"] == {}
    assert {c["name"] for c in report["corpora"]} == {"flores-en", "flores-es", "python"}


def test_language_tax_is_the_premium_and_characters_per_token_of_the_stored_evaluations(report):
    (group,) = report["language_tax"]["groups"]
    assert (group["group"], group["pivot"]) == ("g", "eng_Latn")
    english, spanish = group["languages"]
    assert english["language"] == "eng_Latn" and english["premium"]["version"] == 1.0
    assert spanish["premium"] == pytest.approx({"version": 1.3, "gpt2": 1500 / 900, "cl100k_base": 1.25,
                                                "o200k_base": 1.04})
    cpt = {r["language"]: r["values"] for r in report["language_tax"]["chars_per_token"]}
    assert cpt["spa_Latn"] == pytest.approx({"version": 3.0, "gpt2": 2.6, "cl100k_base": 3.9, "o200k_base": 3900 / 728})
    assert cpt["python"] == pytest.approx({"version": 2.5, "gpt2": 2.0, "cl100k_base": 5000 / 1500})  # o200k: not evaluated
    continued = {r["language"]: r["values"] for r in report["letters_hidden"]["continued_word_rate"]}
    assert continued["eng_Latn"]["version"] == pytest.approx(0.10)
    assert continued["python"]["cl100k_base"] == pytest.approx(0.30)


def test_the_fixed_texts_are_cut_by_the_versions_own_tokenizer_and_by_tiktoken(report, priced):
    tokenizer = priced["tokenizer"]

    def pieces(text):
        return [text[s:e] for s, e in tokenizer.encode(text, add_special_tokens=False).offsets]

    assert [item["pieces"] for item in report["numbers"]["version"]["items"]] == [pieces(t) for t in NUMBERS]
    bare = len(pieces(UNINDENTED))
    assert [(r["tokens"], r["indent_tokens"]) for r in report["indentation"]["version"]] == [
        (len(pieces(text)), len(pieces(text)) - bare) for _, text in INDENTS]
    trailing = report["trailing_space"]["version"]
    assert trailing["extra_tokens"] == len(pieces(TRAILING[1])) - len(pieces(TRAILING[0]))
    words = report["letters_hidden"]["words"]["version"]
    assert [w["text"] for w in words["items"]] == list(WORDS)
    assert words["split_share"] == pytest.approx(sum(w["tokens"] > 1 for w in words["items"]) / len(WORDS))
    assert 0.0 <= report["numbers"]["version"]["digit_grouping"]["consistency"] <= 1.0
    enc = load_reference("cl100k_base")
    assert [r["tokens"] for r in report["indentation"]["cl100k_base"]] == [len(enc.encode_ordinary(t)) for _, t in INDENTS]
    assert report["numbers"]["cl100k_base"]["digit_grouping"]["consistency"] == 1.0


def test_ghost_tokens_add_up_over_the_corpora(report, priced):
    g1, g2, _g3, g4, _byte = priced["ghosts"]
    ghosts = report["ghost_tokens"]
    assert ghosts["clip"] == 3
    mine = ghosts["subjects"]["version"]
    assert (mine["available"], mine["corpora"], mine["of_corpora"], mine["tokens"]) == (True, 3, 3, 4300)
    # g1 is never seen; g2 twice and g4 twice over the three corpora; g3 three times: not a ghost.
    # The special token is never produced, so it does not count; the byte is a base symbol.
    assert (mine["never"], mine["rare"], mine["learned_never"], mine["learned_rare"], mine["base_never"]) == (2, 4, 1, 3, 1)
    assert [(t["id"], t["count"]) for t in mine["listed"]] == [(g1, 0), (g2, 2), (g4, 2)]
    shown = priced["tokenizer"].id_to_token(g1).replace("Ġ", " ")
    assert mine["listed"][0]["token"] == shown
    assert mine["entries"] == priced["tokenizer"].get_vocab_size(with_added_tokens=True) - 1
    gpt2 = ghosts["subjects"]["gpt2"]
    assert (gpt2["available"], gpt2["corpora"]) == (True, 3)
    assert gpt2["never"] == 50257 - 1 - 10  # all but the ten ids seen, <|endoftext|> aside
    assert gpt2["learned_never"] == gpt2["never"] - (256 - 10) and len(gpt2["listed"]) == 20
    assert ghosts["subjects"]["cl100k_base"] == {"corpora": 0, "of_corpora": 3, "tokens": 0, "available": False}
    assert ghosts["subjects"]["o200k_base"]["available"] is False


def test_latest_works_and_another_teams_version_is_not_found(client, sessionmaker):
    assert client.get(f"/v1/tokenizers/{NAME}/versions/latest/report").json()["version"] == 1
    _, other = make_team(sessionmaker)
    response = client.get(URL, headers={"Authorization": f"Bearer {other}"})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")


def test_a_version_whose_encodes_fail_keeps_its_measured_sections(client, monkeypatch):
    def cut_short(store, version, text):
        raise InvalidInput("'text': the tokenizer's pre-tokenization regex took longer than 5s", field="text")

    from service.routes import tokenizers

    encode = cost_report.encode_with_version
    monkeypatch.setattr(cost_report, "_CACHE", type(cost_report._CACHE)())  # nothing probed yet
    monkeypatch.setattr(tokenizers, "_REPORTS", type(tokenizers._REPORTS)(64))  # nor answered
    monkeypatch.setattr(cost_report, "encode_with_version", cut_short)
    body = client.get(URL).json()
    assert "took longer" in body["unavailable"]["version"]
    assert "version" not in body["numbers"] and list(body["numbers"]) == ["gpt2", "cl100k_base", "o200k_base"]
    assert body["language_tax"]["groups"][0]["languages"][1]["premium"]["version"] == pytest.approx(1.3)
    assert body["ghost_tokens"]["subjects"]["version"]["available"] is True
    monkeypatch.setattr(cost_report, "encode_with_version", encode)
    body = client.get(URL).json()  # a failure is not remembered: the next report probes again
    assert body["unavailable"] == {} and "version" in body["numbers"]


def test_evaluations_keep_their_counts_where_the_api_shows_them(client, priced, sessionmaker):
    items = client.get(f"/v1/tokenizers/{NAME}/versions/1/evaluations").json()["items"]
    size = priced["tokenizer"].get_vocab_size(with_added_tokens=True)
    assert all(i["metrics"]["token_counts"].startswith(f"c3/{size}/") for i in items)
    with sessionmaker() as session:
        rows = session.scalars(select(Evaluation).where(Evaluation.version_id == priced["row"].id)).all()
    assert max(len(r.metrics["token_counts"]) for r in rows) < 1000  # a 400-token vocabulary packs small


def test_the_version_page_shows_the_per_language_tables_of_the_report(app_client, priced, report):
    from tests.api.dashboard import sign_in

    sign_in(app_client, priced["key"])
    try:
        html = app_client.get(f"/tokenizers/{NAME}/versions/1").text
    finally:
        app_client.cookies.clear()
    for table_id, rows, shown in (("cost-cpt", report["language_tax"]["chars_per_token"], lambda v: f"{v:.2f}"),
                                  ("cost-continued", report["letters_hidden"]["continued_word_rate"],
                                   lambda v: f"{100 * v:.1f}")):
        table = html.split(f'id="{table_id}"')[1].split("</table>")[0]
        assert rows and all(row["values"] for row in rows), table_id
        for row in rows:
            cells = table.split(f'<th scope="row">{row["language"]}</th>')[1].split("</tr>")[0]
            for subject, value in row["values"].items():
                assert f'data-subject="{subject}">{shown(value)}' in cells, (table_id, row["language"], subject)


def test_a_report_asked_again_is_not_recomputed(client, monkeypatch):
    # Reading every evaluation's token counts is the report's cost: once per change of the team's evaluations.
    first = client.get(URL)
    assert first.status_code == 200
    calls = []
    real = cost_report._measured_costs
    monkeypatch.setattr(cost_report, "_measured_costs", lambda *a: calls.append(1) or real(*a))
    again = client.get(URL)
    assert again.status_code == 200 and again.json() == first.json()
    assert calls == []
