"""Issue 13's cost report and small fixes in a real browser: the version page's "What this
tokenizer costs" with the API's numbers, the playground tokenized on load, a corpus's id copied
and the corpus deleted from its page, and nothing wider than a 390 px phone."""

import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import PHONE, screenshot
from tests.services import FIXTURES
from tests.waiting import finished

FLORES = FIXTURES / "parallel_flores200_dev"
LINES = 250


def lines_of(language: str) -> bytes:
    with (FLORES / f"{language}.txt").open("rb") as handle:
        return b"".join(next(handle) for _ in range(LINES))


def upload(api, name: str, language: str, data: bytes, group: str | None = None) -> str:
    fields = {"name": name, "domain": "news", "language": language, **({"parallel_group": group} if group else {})}
    response = api.post("/v1/corpora", data=fields, files={"file": (f"{name}.txt", data)})
    assert response.status_code == 201, response.text
    return response.json()["id"]


@pytest.fixture(scope="module")
def version(stack, team):
    """A version trained by the stack's worker on parallel English and Spanish: (name, number)."""
    import httpx

    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {team.key}"}, timeout=120) as api:
        group, name = f"costs-{uuid.uuid4().hex[:6]}", f"costs-{uuid.uuid4().hex[:6]}"
        corpora = [upload(api, f"{group}-{lang}", lang, lines_of(lang), group) for lang in ("eng_Latn", "spa_Latn")]
        job = api.post("/v1/jobs", json={"tokenizer": name, "spec": {"vocab_size": 1000}, "train_corpora": corpora})
        assert job.status_code == 202, job.text
        done = finished(api, f"/v1/jobs/{job.json()['id']}")
        assert done["status"] == "succeeded", done
        return name, done["version"]


def fits(page: Page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_version_page_shows_what_the_tokenizer_costs(browse, team, api, version):
    name, number = version
    page, _ = browse(key=team.key)
    page.goto(f"/tokenizers/{name}/versions/{number}")
    costs = page.locator("#costs")
    expect(costs.get_by_role("heading", name="What this tokenizer costs")).to_be_visible()
    report = api.get(f"/v1/tokenizers/{name}/versions/{number}/report").json()
    assert report["unavailable"] == {}

    spanish = costs.locator('[data-cost="language_tax"] tr[data-language="spa_Latn"]')
    premium = report["language_tax"]["groups"][0]["languages"][1]["premium"]
    expect(spanish.locator('td[data-subject="version"] .premium-value')).to_have_text(f"{premium['version']:.3f}")
    expect(spanish.locator('td[data-subject="gpt2"] .premium-value')).to_have_text(f"{premium['gpt2']:.3f}")

    indentation = costs.locator("#cost-indentation tbody tr").first  # 4 spaces before return x
    for key in ("version", "gpt2", "cl100k_base"):
        expect(indentation.locator(f'td[data-subject="{key}"]')).to_have_text(str(report["indentation"][key][0]["tokens"]))
    consistency = report["numbers"]["version"]["digit_grouping"]["consistency"]
    assert float(costs.locator('#cost-numbers td[data-subject="version"][data-consistency]').get_attribute(
        "data-consistency")) == consistency
    ghosts = report["ghost_tokens"]["subjects"]["version"]
    assert ghosts["available"] and ghosts["corpora"] == 2
    expect(costs.locator('#cost-ghosts td[data-subject="version"][data-field="never"]')).to_have_text(f"{ghosts['never']:,}")
    assert costs.locator("#cost-ghost-list li").count() == len(ghosts["listed"])
    screenshot(page, "version-costs")


def test_the_playground_shows_its_prefilled_text_tokenized_on_load(browse, team, api, version):
    name, number = version
    page, _ = browse(key=team.key)
    page.goto(f"/tokenizers/{name}/versions/{number}")
    boxes = page.locator(f'#pg-main [data-tokenizer="{name} v{number}"] .tok')
    expect(boxes.first).to_be_visible()  # nothing pressed
    expect(page.locator('#pg-other [data-tokenizer="o200k_base"]')).to_be_visible()
    text = page.get_by_label("Text to tokenize").input_value()
    ids = boxes.evaluate_all("boxes => boxes.map(b => Number(b.dataset.id))")
    assert ids == api.post(f"/v1/tokenizers/{name}/versions/{number}/encode", json={"text": text}).json()["ids"]


def test_a_corpus_id_is_copied_and_the_corpus_deleted_from_its_page(browse, team, api):
    corpus_id = upload(api, f"doomed-{uuid.uuid4().hex[:6]}", "eng_Latn", b"a line to delete\nand another\n")
    page, _ = browse(key=team.key)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"/corpora/{corpus_id}")
    expect(page.locator("#corpus-id")).to_have_text(corpus_id)
    page.get_by_role("button", name="Copy the corpus id").click()
    expect(page.locator(".copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == corpus_id

    page.once("dialog", lambda dialog: dialog.dismiss())  # the page asks first: "no" keeps it
    page.get_by_role("button", name="Delete corpus").click()
    assert api.get(f"/v1/corpora/{corpus_id}").status_code == 200
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete corpus").click()
    page.wait_for_url("**/corpora?deleted=*")
    expect(page.locator("#corpus-deleted")).to_be_visible()
    assert page.locator(f'tr[data-corpus="{corpus_id}"]').count() == 0
    assert api.get(f"/v1/corpora/{corpus_id}").status_code == 404


def test_nothing_is_wider_than_a_phone(browse, team, version):
    name, number = version
    phone, _ = browse(PHONE, key=team.key)
    phone.goto(f"/tokenizers/{name}/versions/{number}")
    phone.locator("#costs").scroll_into_view_if_needed()
    assert fits(phone)
    # Tables scroll inside their frames; the cards themselves stay within the screen.
    widths = phone.locator("#costs .card").evaluate_all("cards => cards.map(c => c.getBoundingClientRect().right)")
    assert widths and max(widths) <= PHONE["width"]
    screenshot(phone, "version-costs-phone")

    phone.goto(f"/?tokenizer={name}")
    assert fits(phone)
    chart = phone.locator("#premium svg.chart-narrow")
    expect(chart).to_be_visible()  # the parity chart's drawing for a phone, not the wide one
    expect(phone.locator("#premium svg.chart-wide")).to_be_hidden()
    box = chart.evaluate("svg => [svg.getBoundingClientRect().width, svg.parentElement.clientWidth, "
                         "svg.parentElement.scrollWidth]")
    assert box[0] <= box[1] and box[2] <= box[1], box
    screenshot(phone, "fertility-premium-phone")

    phone.goto("/corpora")
    assert fits(phone)
