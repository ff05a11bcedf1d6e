"""Issue 23, the dashboards as a person uses them, in a real browser at 1280×900 and 390×844.

One team gets parallel corpora (a line-aligned group with Hindi, and a group whose lines do not
align), a corpus in no group, and versions trained by the stack's worker: plain BPE twice (the
second asking for more than the text holds), parity-aware BPE at the first one's size, and a
sentencepiece BPE with byte fallback that never saw Cyrillic. Then every page is visited at both
widths, and tests/browser/layout.js lists whatever a person would find cut off: a page that
scrolls sideways, a box that scrolls without its cue or sticky first column, an element out of its
box, chart text cut or under 11 px, a compared column out of view. The screenshots for the README
are taken here (`make docs`).
"""

import re
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import DESKTOP, PHONE, SCREENSHOTS, screenshot
from tests.services import FIXTURES
from tests.waiting import finished, until
from tokenmill.db import transaction
from tokenmill.models import TrainingJob

FLORES = FIXTURES / "parallel_flores200_dev"
LAYOUT = Path(__file__).with_name("layout.js").read_text()
LINES = 120
WIDTHS = {"desktop": DESKTOP, "phone": PHONE}
# The README's pictures (make docs): page → (file name, whole page?); the phone's get "-phone".
SHOTS = {"fertility": ("fertility", True), "version": ("version", False), "job": ("job", True),
         "jobs": ("jobs-list", True), "tokenizer": ("tokenizer", True), "new-job": ("new-job", True),
         "corpus": ("corpus", True)}


def lines(language: str, count: int, offset: int = 0) -> bytes:
    with (FLORES / f"{language}.txt").open("rb") as handle:
        return b"".join(line for i, line in enumerate(handle) if offset <= i < offset + count)


def upload(api: httpx.Client, name: str, language: str, data: bytes, group: str | None = None, domain: str = "news") -> str:
    fields = {"name": name, "domain": domain, "language": language, **({"parallel_group": group} if group else {})}
    response = api.post("/v1/corpora", data=fields, files={"file": (f"{name}.txt", data)})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def train(api: httpx.Client, name: str, spec: dict, corpora: list[str]) -> dict:
    job = api.post("/v1/jobs", json={"tokenizer": name, "spec": spec, "train_corpora": corpora})
    assert job.status_code == 202, job.text
    return job.json()


@pytest.fixture(scope="module")
def site(stack, team, sessionmaker):
    """The team's corpora, versions and jobs (names, ids), once the worker has trained and evaluated them all."""
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {team.key}"}, timeout=120) as api:
        tag = uuid.uuid4().hex[:6]
        group, ragged = f"flores-{tag}", f"ragged-{tag}"
        flores = {lang: upload(api, f"flores-{lang}-{tag}", lang, lines(lang, LINES), group)
                  for lang in ("eng_Latn", "hin_Deva", "spa_Latn")}
        corpora = {**flores, "ragged-eng": upload(api, f"ragged-eng-{tag}", "eng_Latn", lines("eng_Latn", 100, 500), ragged),
                   "ragged-deu": upload(api, f"ragged-deu-{tag}", "deu_Latn", lines("deu_Latn", 80, 500), ragged),
                   "code": upload(api, f"code-{tag}", "python", (FIXTURES / "code" / "python.txt").read_bytes()[:60_000],
                                  domain="code")}
        names = {"plain": f"news-{tag}", "parity": f"parity-{tag}", "fallback": f"fallback-{tag}"}
        jobs = [train(api, names["plain"], {"vocab_size": 500}, list(flores.values())),
                train(api, names["parity"], {"vocab_size": 500, "parity": True, "parity_dev_lines": 40},
                      list(flores.values())),
                train(api, names["fallback"], {"library": "sentencepiece", "algorithm": "bpe", "vocab_size": 400,
                                               "byte_fallback": True}, [flores["eng_Latn"], flores["spa_Latn"]]),
                train(api, names["plain"], {"vocab_size": 20000}, [flores["eng_Latn"]])]
        done = [finished(api, f"/v1/jobs/{job['id']}", timeout=600) for job in jobs]
        assert [job["status"] for job in done] == ["succeeded"] * 4, done
        until(lambda: api.get(f"/v1/corpora/{corpora['code']}").json(), lambda c: c["statistics"] is not None, 120)
    with transaction(sessionmaker) as session:  # a failed job, as a worker would leave it
        failed = TrainingJob(team_id=session.get_one(TrainingJob, uuid.UUID(done[0]["id"])).team_id,
                             tokenizer=names["plain"], spec={"vocab_size": 500}, train_corpus_ids=[flores["eng_Latn"]],
                             eval_corpus_ids=[], status="failed", stage="failed", progress=0.4, attempts=1,
                             error="training failed: the corpus is empty after normalization\n  hint: check text_field")
        session.add(failed)
    return {"names": names, "corpora": corpora, "jobs": [job["id"] for job in done], "failed": str(failed.id),
            "ragged": ragged}


def pages(site) -> dict[str, str]:
    names, corpora, jobs = site["names"], site["corpora"], site["jobs"]
    return {
        "fertility": "/", "fertility-filtered": f"/?tokenizer={names['plain']}", "jobs": "/jobs", "new-job": "/jobs/new",
        "job": f"/jobs/{jobs[3]}", "job-failed": f"/jobs/{site['failed']}", "tokenizer": f"/tokenizers/{names['plain']}",
        "version": f"/tokenizers/{names['plain']}/versions/1", "version-parity": f"/tokenizers/{names['parity']}/versions/1",
        "version-fallback": f"/tokenizers/{names['fallback']}/versions/1", "corpora": "/corpora",
        "corpus": f"/corpora/{corpora['code']}", "bpe": "/bpe",
        "bpe-replay": f"/bpe?tokenizer={names['plain']}&version=1&corpus_id={corpora['hin_Deva']}&lines=20&step=40",
        "not-found-job": f"/jobs/{uuid.uuid4()}", "not-found-tokenizer": "/tokenizers/no-such-name",
        "not-found-version": f"/tokenizers/{names['plain']}/versions/99", "not-found-corpus": f"/corpora/{uuid.uuid4()}",
        "not-found-path": "/jobs/not/a/page",
    }


def cut_off(page: Page) -> list[str]:
    return page.evaluate(LAYOUT)


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_at_both_widths(browse, team, site, width):
    page, console = browse(WIDTHS[width], key=team.key)
    problems = {}
    for label, path in pages(site).items():
        status = 404 if label.startswith("not-found") else 200
        if status == 404:
            console.allow(404, path.split("?")[0])
        response = page.goto(path)
        assert response.status == status, (path, response.status)
        assert response.headers["content-type"].startswith("text/html"), path
        page.wait_for_load_state("networkidle")
        if found := cut_off(page):
            problems[path] = found
        if label in SHOTS:
            name, whole = SHOTS[label]
            screenshot(page, name if width == "desktop" else f"{name}-phone", full_page=whole)
    assert problems == {}
    page.context.clear_cookies()
    page.goto("/signin")
    assert cut_off(page) == []
    screenshot(page, "signin" if width == "desktop" else "signin-phone")


def test_the_check_finds_what_is_cut_off(browse, team, site):
    """layout.js is the test of every page: it must see a box that scrolls without a cue, text that
    leaves its box, and a compared column out of view."""
    page, _ = browse(PHONE, key=team.key)
    page.goto(f"/tokenizers/{site['names']['plain']}/versions/1")
    assert cut_off(page) == []
    page.evaluate("""() => {
        const wrap = document.querySelector('#metrics').closest('.table-wrap');
        wrap.previousElementSibling.remove();  // its cue
        wrap.querySelector('table').classList.remove('cards');
        wrap.querySelector('table').style.minWidth = '900px';
        document.querySelector('#costs-h').style.whiteSpace = 'nowrap';
        document.querySelector('#costs-h').textContent += ' and a very long heading that cannot wrap on a phone at all';
        document.querySelector('#cost-indentation').classList.remove('cards');
        document.querySelector('#cost-indentation').style.minWidth = '800px';
    }""")
    found = " | ".join(cut_off(page))
    assert "scrolls sideways with no cue" in found
    assert "the content of h2#costs-h sticks out" in found
    assert re.search(r"table#cost-indentation\S* compares columns that are out of view", found), found


def test_the_playground_labels_each_token_by_its_own_text(browse, team, site):
    page, _ = browse(key=team.key)
    name = site["names"]["fallback"]
    page.goto(f"/tokenizers/{name}/versions/1")
    boxes = page.locator(f'#pg-main [data-tokenizer="{name} v1"] .tok .piece')
    prefilled = boxes.all_inner_texts()  # the page's own text, tokenized when it was rendered
    page.get_by_label("Text to tokenize").fill("Мальчик играет в саду.")
    page.get_by_role("button", name="Tokenize").click()
    labels = until(boxes.all_inner_texts, lambda shown: shown and shown != prefilled, 15)
    # Never seen in training, the Cyrillic letters are byte tokens: each shows its own byte, not the word.
    assert "Мальчик" not in labels and "<0xD0>" in labels and len(labels) > 14
    assert sum(label == "<0xD0>" for label in labels) >= 6 and "␣" in "".join(labels)  # a byte each; a space as ␣
    plain = site["names"]["plain"]
    page.goto(f"/tokenizers/{plain}/versions/1")
    page.get_by_label("Text to tokenize").fill("Der Junge spielt")
    page.get_by_role("button", name="Tokenize").click()
    # The boxes of the page's own text are there until the answer replaces them.
    shown = until(lambda: "".join(page.locator(f'#pg-main [data-tokenizer="{plain} v1"] .tok .piece')
                                  .all_inner_texts()).replace("␣", " "), lambda text: text == "Der Junge spielt", 15)
    assert shown == "Der Junge spielt"
    assert "Ġ" not in page.locator("#playground").inner_text()


def test_parity_stands_beside_its_plain_twin(browse, team, site):
    page, _ = browse(key=team.key)
    names = site["names"]
    page.goto(f"/tokenizers/{names['parity']}/versions/1")
    expect(page.locator("#parity-tag")).to_have_text("parity-aware")
    expect(page.locator("#parity-twin")).to_have_text(f"{names['plain']} v1")
    hindi = page.locator('#parity-table tr[data-language="hin_Deva"]')
    assert re.fullmatch(r"[\d,]+", hindi.locator("td").first.inner_text())  # absolute tokens beside the premium
    # Absolute tokens beside every premium of the language tax, and the corpus-level premium said so.
    tax = page.locator('[data-cost="language_tax"]')
    expect(tax.locator('tr[data-language="hin_Deva"] td[data-subject="version"] .tokens-count')).to_contain_text("tokens")
    expect(tax.locator('tr[data-language="deu_Latn"][data-measure="corpus-level"]')).to_contain_text("corpus-level")
    # gpt2's split cuts Devanagari at every vowel sign: a floor no merge passes.
    expect(page.locator('#split-floors li[data-pattern="gpt2"][data-language="hin_Deva"]')).to_contain_text(
        "at combining marks")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#parity").screenshot(path=str(SCREENSHOTS / "parity.png"))
    tax.screenshot(path=str(SCREENSHOTS / "language-tax.png"))
    # The plain version points back; a version without a twin offers to train it, filled in.
    page.goto(f"/tokenizers/{names['plain']}/versions/2")
    expect(page.locator("#parity-twin")).to_have_count(0)
    page.goto(f"/tokenizers/{names['plain']}/versions/1")
    expect(page.locator("#parity-twin")).to_have_text(f"{names['parity']} v1")


def test_the_form_trains_like_a_version_with_parity_turned(browse, team, site):
    page, _ = browse(key=team.key)
    page.goto(f"/tokenizers/{site['names']['fallback']}/versions/1")
    expect(page.locator("#parity")).to_have_count(0)  # sentencepiece: parity-aware training is not for it
    page.goto(f"/jobs/new?like={site['names']['parity']}@1&parity=false")
    expect(page.locator("#spec-parity")).not_to_be_checked()
    for language in ("eng_Latn", "hin_Deva", "spa_Latn"):
        expect(page.locator(f"#train_corpora-{site['corpora'][language]}")).to_be_checked()
    expect(page.get_by_label("Tokenizer name")).to_have_value(site["names"]["parity"])
    expect(page.locator('#job-advice [data-advice="parity"]')).to_contain_text("parity would give them closer")


def test_the_new_job_form_groups_the_spec_and_explains_the_choice(browse, team, site):
    page, _ = browse(key=team.key)
    page.goto("/jobs/new")
    assert page.locator("#advanced").get_attribute("open") is None  # advanced fields folded
    expect(page.locator("#spec-vocab_size")).to_be_visible()
    expect(page.locator("#spec-min_frequency")).to_be_hidden()
    group = page.locator(f'#train_corpora .corpus-group[data-group="{site["ragged"]}"]')
    expect(group).to_contain_text("lines not aligned")
    page.locator(f"#train_corpora-{site['corpora']['ragged-eng']}").check()
    page.locator("#spec-vocab_size").fill("32000")
    # With script the advice follows the form: this little text will stop far short of 32,000.
    expect(page.locator('#job-advice [data-advice="vocabulary"]')).to_contain_text("will likely stop near")
    page.locator(f"#train_corpora-{site['corpora']['hin_Deva']}").check()
    expect(page.locator('#job-advice [data-advice="split"]')).to_contain_text("hin_Deva")
    page.locator("section.advice").screenshot(path=str(SCREENSHOTS / "new-job-advice.png"))
    page.locator("#advanced > summary").click()
    expect(page.locator("#spec-min_frequency")).to_be_visible()


def test_a_job_and_a_tokenizer_have_pages(browse, team, site):
    page, _ = browse(key=team.key)
    names = site["names"]
    page.goto(f"/jobs/{site['jobs'][3]}")
    expect(page.locator("#job-version")).to_have_text(f"{names['plain']} v2")
    expect(page.locator(".job-note")).to_contain_text("of the 20000 tokens asked for")
    assert page.locator("#job-stages tbody tr").count() == 4  # queued, training, evaluating, succeeded
    page.goto(f"/jobs/{site['failed']}")
    expect(page.locator("#job-error")).to_contain_text("hint: check text_field")
    expect(page.locator("#job-attempts")).to_have_text("1 of at most 3")
    # The version's "job" link is the job's page.
    page.goto(f"/tokenizers/{names['plain']}/versions/2")
    page.locator("#version-job").click()
    page.wait_for_url(f"**/jobs/{site['jobs'][3]}")
    page.goto(f"/tokenizers/{names['plain']}")
    expect(page.locator('#spec-compare tr[data-field="vocab_size"]')).to_have_class(re.compile("differs"))
    page.get_by_label("From").select_option("2")
    page.get_by_label("to", exact=True).select_option("1")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#diff-summary")).to_contain_text("From v2 to v1")
    assert page.locator("#tokenizer-fertility tbody tr").count() >= 6


def test_replaying_a_version_jumps_to_the_end(browse, team, site):
    page, _ = browse(key=team.key)
    page.goto(pages(site)["bpe-replay"])
    counter = page.locator("#bpe-counter")
    expect(counter).to_have_text(re.compile(r"^40 / \d+ merges"))
    total = int(counter.inner_text().split("/")[1].split()[0])
    assert total > 100
    asked = []
    page.on("request", lambda request: asked.append(request.url) if request.url.endswith("/bpe/steps") else None)
    page.get_by_role("button", name="⏭ To the end").click()
    expect(counter).to_have_text(f"{total} / {total} merges", timeout=10_000)
    assert len(asked) == 1  # the last state alone, not every state on the way
    assert "Ġ" not in page.locator("#bpe-lists").inner_text() and "␣" in page.locator("#bpe-lists").inner_text()


def test_the_jobs_page_reads_on_a_phone(browse, team, site):
    page, _ = browse(PHONE, key=team.key)
    page.goto("/jobs")
    note = page.locator(f"#job-{site['jobs'][3]} .job-note")
    expect(note).to_be_visible()
    box = note.bounding_box()  # the vocabulary warning reads as a paragraph, not a word a line
    assert box and box["width"] > 250, box
