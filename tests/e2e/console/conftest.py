"""The console in a real browser: Debian's chromium driven by Playwright (no browser download).

``browser`` is one chromium for the session; ``console`` starts a real API
(gunicorn) and gives a ``Console`` with a signed-in page (``signed_in``: one on
an API a test started itself). Screenshots go to
``var/test-output/console/`` (GATEHOUSE_TEST_OUTPUT overrides), one per page
a test looks at.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.conftest import ADMIN_TOKEN, missing_tool
from tests.support.processes import REPO

CHROMIUM = (
    os.environ.get("GATEHOUSE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
)
OUTPUT = Path(os.environ.get("GATEHOUSE_TEST_OUTPUT", REPO / "var" / "test-output")) / "console"
AXE = REPO / "tests" / "support" / "vendor" / "axe.min.js"


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        missing_tool(
            "no chromium — apt-get install chromium (or set GATEHOUSE_CHROMIUM to a Chromium binary)"
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@dataclass
class Console:
    url: str
    page: Page

    def open(self, path: str) -> Page:
        self.page.goto(f"{self.url}{path}")
        return self.page

    def shot(self, name: str) -> Path:
        OUTPUT.mkdir(parents=True, exist_ok=True)
        path = OUTPUT / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def axe(self) -> list[dict]:
        """axe-core's serious and critical violations on the current page (vendored axe, run in the page)."""
        self.page.evaluate(AXE.read_text())
        result = self.page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
        return [v for v in result["violations"] if v["impact"] in ("serious", "critical")]


def sign_in(page: Page, url: str, token: str = ADMIN_TOKEN) -> None:
    page.goto(f"{url}/console/login?next=/console/modules")
    page.fill("#token", token)
    page.click("button[type=submit]")
    expect(page.locator("nav[aria-label=Console]")).to_be_visible()


@contextmanager
def signed_in(browser: Browser, url: str) -> Iterator[Console]:
    """A ``Console`` on the API at ``url``; on exit, the page must have logged no error."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    sign_in(page, url)
    yield Console(url, page)
    context.close()
    assert not errors, f"the page logged errors: {errors}"  # CSP violations show up here too


@pytest.fixture
def console(browser: Browser, processes) -> Iterator[Console]:
    with signed_in(browser, processes.api()[1]) as console:
        yield console
