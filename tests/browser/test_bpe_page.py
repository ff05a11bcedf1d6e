"""The BPE step-through page in a real browser: the seed article's corpus merged step by step,
the tie-break switched, a stored version replayed on a corpus sample, and the page on a phone."""

import re
import uuid

from playwright.sync_api import Page, expect

from service.web.tokens import version_labeller
from tests.browser.conftest import PHONE, screenshot
from tests.browser.test_dashboards import assert_labelled
from tests.integration.served import add_version
from tests.text import flores_lines
from tokenmill.db import transaction
from tokenmill.teams import team_by_name
from tokenmill.training import with_tokenizers
from tokenmill.training.export import artifact_files
from tokenmill.training.spec import resolve_spec


def shown_merges(page: Page) -> list[str]:
    """The merge rules the page shows, as "e + r → er" (the count left off)."""
    items = page.locator("#bpe-merges li:visible").all_inner_texts()
    return [re.sub(r"\s+\d+×$", "", item.strip()) for item in items]


def next_bar(page: Page) -> str | None:
    """The pair of the chart's highlighted bar (the merge that comes next), as "e r"."""
    return page.locator('#bpe-chart svg.chart:visible rect[data-next="true"]').get_attribute("data-pair")


def test_step_back_and_automerge_the_article_corpus(browse, team):
    page, _ = browse(key=team.key)
    page.goto("/bpe")
    assert_labelled(page)
    counter = page.locator("#bpe-counter")
    expect(counter).to_have_text("0 / 16 merges")
    assert next_bar(page) == "e r" and shown_merges(page) == []
    assert page.locator("#bpe-vocab li:visible").count() == 11  # the article's "11 tokens"

    step = page.get_by_role("button", name="Step ▶")
    for done in range(1, 4):  # as a person steps: each step shown before the next click
        step.click()
        expect(counter).to_have_text(f"{done} / 16 merges")
    assert shown_merges(page) == ["e + r → er", "er + · → er·", "n + e → ne"]
    assert next_bar(page) == "ne w"
    assert page.locator("#bpe-vocab li:visible").count() == 14
    expect(page.locator("#bpe-words li").nth(2)).to_have_text(re.compile(r"6×\s*ne\s*w\s*er·"))

    page.get_by_role("button", name="◀ Back").click()
    expect(counter).to_have_text("2 / 16 merges")
    assert shown_merges(page) == ["e + r → er", "er + · → er·"]
    assert next_bar(page) == "n e"
    assert "step=2" in page.url  # a reload (or a page without script) shows the same state
    screenshot(page, "bpe")

    page.get_by_role("button", name="▶▶ Automerge").click()
    expect(counter).to_have_text("16 / 16 merges", timeout=20_000)
    assert len(shown_merges(page)) == 16 and shown_merges(page)[-1] == "new + · → new·"
    expect(page.locator("#bpe-next")).to_contain_text("No pair occurs 2 times")
    assert page.get_by_role("button", name="Step ▶").is_disabled()

    # The library's rule on the same corpus, at the same step: its third merge is e + w.
    page.get_by_label(re.compile("^Hugging Face tokenizers")).check()
    expect(page.locator("#bpe-merges li").nth(2)).to_have_text(re.compile(r"^e \+ w → ew"))
    expect(counter).to_have_text("16 / 16 merges")
    page.get_by_role("button", name="Reset").click()
    expect(counter).to_have_text("0 / 16 merges")
    assert shown_merges(page) == []


def test_a_stored_version_replays_on_a_corpus_sample(browse, team, api, sessionmaker, store):
    texts = flores_lines(15, languages=("eng_Latn",))
    corpus = api.post("/v1/corpora", data={"name": "flores-sample", "domain": "news", "language": "eng_Latn"},
                      files={"file": ("sample.txt", "\n".join(texts).encode())}).json()
    spec = resolve_spec({"vocab_size": 400})
    tokenizer = with_tokenizers.train(spec, texts)
    files, _ = artifact_files(spec, tokenizer)
    name = f"replay-{uuid.uuid4().hex[:6]}"
    with transaction(sessionmaker) as session:
        row = team_by_name(session, team.name)
    add_version(sessionmaker, store, row, name, spec, files, tokenizer.get_vocab_size())
    expected = api.post("/v1/bpe/steps", json={"tokenizer": name, "corpus_id": corpus["id"], "lines": 15,
                                                "steps": 2}).json()

    page, _ = browse(key=team.key)
    page.goto("/bpe")
    page.get_by_label("Tokenizer", exact=True).select_option(name)
    page.get_by_label("Corpus to sample").select_option(corpus["id"])
    page.get_by_label("Lines of it").fill("15")
    page.get_by_role("button", name="Replay its merges").click()
    expect(page.locator("#bpe-run-h")).to_contain_text(f"{name} v1: its first merges on the first 15 lines")
    page.get_by_role("button", name="Step ▶").click()
    page.get_by_role("button", name="Step ▶").click()
    expect(page.locator("#bpe-counter")).to_have_text(re.compile(r"^2 / \d+ merges"))
    shown = version_labeller(spec.model_dump())  # as the page writes tokens: "Ġt" is "␣t"
    firsts = [f"{shown(m['pair'][0])} + {shown(m['pair'][1])} → {shown(m['token'])}" for m in expected["merges"]]
    assert shown_merges(page) == firsts
    third = api.post("/v1/bpe/steps", json={"tokenizer": name, "corpus_id": corpus["id"], "lines": 15, "steps": 3,
                                            "start": 2}).json()["states"][0]["next"]
    assert next_bar(page) == " ".join(third["pair"])
    expect(page.locator("#bpe-next")).to_contain_text(f"occurs {third['count']}×")
    screenshot(page, "bpe-version")


def test_the_page_fits_a_phone(browse, team):
    phone, _ = browse(PHONE, key=team.key)
    phone.goto("/bpe?step=5")
    expect(phone.locator("#bpe-counter")).to_have_text("5 / 16 merges")
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    box = phone.locator("#bpe-chart").bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]  # the chart shrinks, no scrolling
    phone.get_by_role("button", name="Step ▶").click()
    expect(phone.locator("#bpe-counter")).to_have_text("6 / 16 merges")
    screenshot(phone, "bpe-phone")
