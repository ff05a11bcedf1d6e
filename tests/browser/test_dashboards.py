"""The dashboards in a real browser: sign in, upload, train from the form, and read the numbers the API gives."""

import re
import uuid
from pathlib import Path

import pytest
from playwright.sync_api import Page
from sqlalchemy import update

from tests.browser.conftest import PHONE, screenshot
from tests.services import FIXTURES
from tokenmill.db import transaction
from tokenmill.models import TrainingJob
from tokenmill.teams import team_by_name

FLORES = FIXTURES / "parallel_flores200_dev"
LINES = 300
JOB_TIMEOUT = 180_000  # ms


def flores_head(tmp_path: Path, language: str) -> Path:
    """The first few hundred lines of one FLORES-200 language, as a file to upload."""
    path = tmp_path / f"flores-{language}.txt"
    with (FLORES / f"{language}.txt").open("rb") as handle:
        path.write_bytes(b"".join(next(handle) for _ in range(LINES)))
    return path


def assert_labelled(page: Page) -> None:
    """Every visible form control has a label (or an aria-label) a screen reader can announce."""
    unlabelled = page.evaluate("""() => Array.from(document.querySelectorAll('input, select, textarea'))
        .filter(el => el.type !== 'hidden' && !el.hidden && el.labels.length === 0 && !el.getAttribute('aria-label'))
        .map(el => el.name || el.id)""")
    assert unlabelled == []


def upload(page: Page, path: Path, name: str, language: str, group: str) -> str:
    """Upload through the form (the page's script posts it with progress); returns the corpus id."""
    page.goto("/corpora")
    page.get_by_label("File").set_input_files(str(path))
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_label("Domain", exact=True).fill("news")
    page.get_by_label("Language", exact=True).fill(language)
    page.get_by_label("Parallel group").fill(group)
    with page.expect_response(lambda r: r.url.endswith("/corpora") and r.request.method == "POST") as posted:
        page.get_by_role("button", name="Upload").click()
    assert posted.value.status == 201  # the script's XMLHttpRequest (JSON); a plain form post gets a 303
    page.wait_for_url("**/corpora/*")
    return page.url.rsplit("/", 1)[1]


def fill_job_form(page: Page, name: str, corpus_ids: list[str], vocab_size: int) -> None:
    page.goto("/jobs/new")
    assert_labelled(page)
    page.get_by_label("Tokenizer name").fill(name)
    for corpus_id in corpus_ids:
        page.locator(f"#train_corpora-{corpus_id}").check()
    page.locator("#spec-vocab_size").fill(str(vocab_size))


def train(page: Page, name: str, corpus_ids: list[str], vocab_size: int) -> str:
    """Submit the form, then watch the job's page until the job succeeds; returns the job id."""
    fill_job_form(page, name, corpus_ids, vocab_size)
    page.get_by_role("button", name="Start training").click()
    page.wait_for_url(re.compile(r".*/jobs/[0-9a-f-]{36}$"))
    job_id = page.url.rsplit("/", 1)[1]
    # The page polls while the job runs and reloads itself once it has finished (no data-job any more).
    finished = page.locator(f"#job-{job_id}:not([data-job])")
    finished.wait_for(timeout=JOB_TIMEOUT)
    assert finished.get_attribute("data-status") == "succeeded", finished.inner_text()
    return job_id


def test_sign_in_and_out(browse, team):
    page, console = browse()
    page.goto("/jobs")
    page.wait_for_url("**/signin?next=%2Fjobs")
    assert_labelled(page)
    screenshot(page, "flow-signin")
    page.get_by_label("API key").fill("tm_not-a-key")
    console.allow(401, "/signin")
    page.get_by_role("button", name="Sign in").click()
    assert "unknown or has been revoked" in page.get_by_role("alert").inner_text()
    page.get_by_label("API key").fill(team.key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/jobs")  # back where the visitor was going
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url("**/signin")
    page.goto("/")
    page.wait_for_url("**/signin?next=%2F")


def test_upload_train_and_read_the_dashboards(browse, team, api, tmp_path):
    page, console = browse(key=team.key)
    group, name = f"flores-{uuid.uuid4().hex[:6]}", f"web-bpe-{uuid.uuid4().hex[:6]}"
    english = upload(page, flores_head(tmp_path, "eng_Latn"), "flores-en", "eng_Latn", group)
    german = upload(page, flores_head(tmp_path, "deu_Latn"), "flores-de", "deu_Latn", group)

    # The corpus page reloads until a worker has computed the statistics, then plots them.
    page.locator("#heaps").wait_for(timeout=60_000)
    assert page.locator("#zipf .chart-wide circle").count() > 10
    statistics = api.get(f"/v1/corpora/{german}").json()["statistics"]
    assert page.locator('[data-stat="distinct_words"]').inner_text() == f"{statistics['distinct_words']:,}"
    screenshot(page, "flow-corpus")

    # A spec the API refuses is refused by the form with the same message, on the same field.
    fill_job_form(page, name, [english, german], 100)
    console.allow(422, "/jobs/new")
    page.get_by_role("button", name="Start training").click()
    refused = api.post("/v1/jobs", json={"tokenizer": name, "spec": {"vocab_size": 100}, "train_corpora": [english]})
    assert refused.status_code == 422
    assert page.locator("#error-spec-vocab_size").inner_text() == refused.json()["detail"]
    assert page.locator("#spec-vocab_size").get_attribute("aria-invalid") == "true"
    screenshot(page, "new-job-invalid")

    train(page, name, [english, german], 800)
    train(page, name, [english, german], 2000)

    # Fertility: the matrix shows the very number GET /v1/dashboard/fertility returns.
    page.goto(f"/?tokenizer={name}")
    matrix = api.get("/v1/dashboard/fertility", params={"tokenizer": name}).json()
    expected = next(r for r in matrix["rows"] if r["label"] == f"{name} v1")["domains"]["news"]["fertility"]
    cell = page.locator(f'#fertility-matrix td[data-subject="{name} v1"][data-column="news"]')
    assert float(cell.get_attribute("data-fertility")) == expected
    assert cell.locator(".fert").inner_text() == f"{expected:.3f}"
    page.get_by_label("Also show characters per token").first.check()
    assert cell.locator(".cpt").is_visible()
    assert page.locator("#trend .chart-wide polyline").count() == 1
    assert page.locator("#premium .chart-wide rect[data-subject]").count() >= 8
    screenshot(page, "flow-fertility")

    check_playground(page, api, name)
    assert int(page.locator("#diff-added-count").inner_text().replace(",", "")) > 0
    assert page.locator("#curve .chart-wide polyline").count() == 1  # one curve per version, on its evaluation corpora together
    screenshot(page, "flow-version")

    page.goto("/corpora")
    assert page.locator("#corpora-table tbody tr").count() == 2
    screenshot(page, "corpora")

    phone, _ = browse(PHONE, key=team.key)
    phone.goto(f"/?tokenizer={name}")
    assert phone.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # tables scroll inside
    screenshot(phone, "flow-fertility-phone")


def check_playground(page: Page, api, name: str) -> None:
    """The playground's boxes carry the ids POST .../encode returns, for the version and for GPT-2."""
    text = "Der Junge spielt im Garten. The boy plays in the garden, 1234 times!"
    page.goto(f"/tokenizers/{name}/versions/2")
    assert_labelled(page)
    page.get_by_label("Text to tokenize").fill(text)
    page.get_by_label("Side by side with").select_option("reference:gpt2")
    page.get_by_role("button", name="Tokenize").click()
    page.locator('#pg-other [data-tokenizer="gpt2"]').wait_for()
    page.locator(f'#pg-main [data-tokenizer="{name} v2"]').wait_for()
    ids = page.locator("#pg-main .tok").evaluate_all("boxes => boxes.map(b => Number(b.dataset.id))")
    encoded = api.post(f"/v1/tokenizers/{name}/versions/2/encode", json={"text": text}).json()
    assert ids == encoded["ids"]
    assert page.locator("#pg-main .count").inner_text() == str(encoded["count"])
    gpt2 = page.locator("#pg-other .tok").evaluate_all("boxes => boxes.map(b => Number(b.dataset.id))")
    assert gpt2 == api.post("/v1/references/gpt2/encode", json={"text": text}).json()["ids"]


@pytest.fixture
def job_rows(sessionmaker, team):
    """A running, a failed and a queued job of the team, written straight to the database (no worker sees them)."""
    error = "training failed: the corpus is empty after normalization\n  at stage 'training'\n  hint: check the text_field"
    with transaction(sessionmaker) as session:
        team_id = team_by_name(session, team.name).id
        rows = {status: TrainingJob(team_id=team_id, tokenizer=f"{status}-job", spec={}, train_corpus_ids=[],
                                    eval_corpus_ids=[], status=status, stage=stage, progress=progress, error=message)
                for status, stage, progress, message in (("running", "training", 0.3, None),
                                                         ("failed", "failed", 0.4, error), ("queued", "queued", 0.0, None))}
        session.add_all(rows.values())
    return {status: str(row.id) for status, row in rows.items()}, error


def test_jobs_page_is_live_shows_errors_and_cancels(browse, team, api, sessionmaker, job_rows):
    ids, error = job_rows
    page, _ = browse(key=team.key)
    page.goto("/jobs")
    assert page.locator(f"#job-{ids['failed']} pre.job-error").inner_text() == error  # the full text
    running = page.locator(f"#job-{ids['running']}")
    assert running.locator('[data-field="stage"]').inner_text() == "training"
    with transaction(sessionmaker) as session:
        session.execute(update(TrainingJob).where(TrainingJob.id == uuid.UUID(ids["running"]))
                        .values(stage="evaluating", progress=0.6))
    # No reload: the page polls the job's status every second.
    page.locator(f'#job-{ids["running"]} [data-field="percent"]', has_text="60 %").wait_for(timeout=10_000)
    assert running.locator('[data-field="stage"]').inner_text() == "evaluating"
    screenshot(page, "jobs")

    page.get_by_role("button", name=f"Cancel job queued-job ({ids['queued']})").click()
    page.locator(f'#finished-jobs tr#job-{ids["queued"]}[data-status="cancelled"]').wait_for()
    page.get_by_role("button", name=f"Cancel job running-job ({ids['running']})").click()
    page.locator(f'#finished-jobs tr#job-{ids["running"]}[data-status="cancelled"]').wait_for()
    assert api.get(f"/v1/jobs/{ids['queued']}").json()["status"] == "cancelled"
