"""Browser tests: Debian's headless Chromium, driven by Playwright, against the real stack.

The `stack` fixture (API and worker processes on PostgreSQL, Redis and S3) is shared with the
end-to-end suite (tests/stack.py). Playwright never downloads a browser here: it launches the system's
`chromium` (override with TOKENMILL_CHROMIUM). Every page a test opens records console
errors and uncaught exceptions; a test fails on any it did not expect.
"""

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.conftest import make_team
from tests.services import REPO

CHROMIUM = os.environ.get("TOKENMILL_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# Screenshots land in build/ (ignored); `make docs` copies them over the README's docs/*.png.
SCREENSHOTS = REPO / "build" / "screenshots"
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
FAILED_LOAD = re.compile(r"Failed to load resource: the server responded with a status of (\d+)")


@dataclass
class Console:
    """Console errors and page errors of one page; failed loads a test provokes can be allowed."""

    errors: list[tuple[str, str]] = field(default_factory=list)  # (message, url)
    allowed: set[tuple[int, str]] = field(default_factory=set)  # (status, path)

    def allow(self, status: int, path: str) -> None:
        """A response this test provokes on purpose (a 404 page, a refused form)."""
        self.allowed.add((status, path))

    def unexpected(self) -> list[str]:
        def expected(message: str, url: str) -> bool:
            match = FAILED_LOAD.search(message)
            return bool(match) and (int(match.group(1)), urlsplit(url).path) in self.allowed

        return [f"{message} ({url})" for message, url in self.errors if not expected(message, url)]


def watch(page: Page) -> Console:
    console = Console()
    page.on("console", lambda m: console.errors.append((m.text, m.location.get("url", ""))) if m.type == "error" else None)
    page.on("pageerror", lambda exc: console.errors.append((f"uncaught: {exc}", page.url)))
    return console


@dataclass
class Team:
    name: str
    key: str


@pytest.fixture(scope="session")
def browser() -> Browser:
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set TOKENMILL_CHROMIUM)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def team(sessionmaker) -> Team:
    row, key = make_team(sessionmaker)
    return Team(row.name, key)


@pytest.fixture
def api(stack, team) -> httpx.Client:
    with httpx.Client(base_url=stack, headers={"Authorization": f"Bearer {team.key}"}, timeout=120) as client:
        yield client


def new_page(browser: Browser, base_url: str, viewport=DESKTOP) -> tuple[BrowserContext, Page, Console]:
    context = browser.new_context(base_url=base_url, viewport=viewport)
    page = context.new_page()
    page.set_default_timeout(30_000)
    return context, page, watch(page)


def sign_in(page: Page, key: str) -> None:
    page.goto("/signin")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/")


@pytest.fixture
def browse(browser, stack):
    """Opens desktop or phone pages; at the end, fails on console errors nobody allowed."""
    opened: list[tuple[BrowserContext, Console]] = []

    def open_page(viewport=DESKTOP, key: str | None = None) -> tuple[Page, Console]:
        context, page, console = new_page(browser, stack, viewport)
        opened.append((context, console))
        if key:
            sign_in(page, key)
        return page, console

    yield open_page
    problems = [error for _, console in opened for error in console.unexpected()]
    for context, _ in opened:
        context.close()
    assert not problems, "console errors:\n" + "\n".join(problems)


def screenshot(page: Page, name: str, full_page: bool = True) -> Path:
    """A PNG of the page in build/screenshots/ (`make docs` refreshes the README's copies)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
