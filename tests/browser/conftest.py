"""A real Chromium (Debian's, at /usr/bin/chromium) driven by Playwright."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from onceover.bigquery import BigQueryConfig
from tests.browser.dashboard import VIEWPORT
from tests.conftest import ARTIFACTS, REPO_ROOT
from tests.jobs.orders import control_plane, served

DIST = REPO_ROOT / "frontend" / "dist"

CHROMIUM = os.environ.get("ONCEOVER_CHROMIUM", "/usr/bin/chromium")
# Without the networking flags Chromium keeps trying Google's hosts, which this
# machine refuses; --no-sandbox because tests run as root.
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic",
]  # fmt: skip


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not shutil.which(CHROMIUM) and not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A fresh page; its screenshot is kept in test-artifacts/ whatever the outcome.

    Whatever the test, the page must keep to the backend's Content-Security-Policy:
    Chromium reports each thing the policy blocked on the console, and one fails the
    test (a policy too tight for the dashboard breaks it quietly otherwise)."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    blocked: list[str] = []
    page.on(
        "console",
        lambda message: (
            blocked.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not blocked, f"the page broke the Content-Security-Policy: {blocked}"


# `page` after `backend_url`: the page and its change stream close before the server stops.
@pytest.fixture
def backend_url(bq_config: BigQueryConfig, tmp_path: Path) -> Iterator[str]:
    """A real backend serving the built dashboard, reconciling nothing by itself."""
    assert (DIST / "index.html").is_file(), "run `make frontend` first"
    app = control_plane(bq_config, tmp_path, frontend_dist=DIST, reconcile_on_success=False)
    with served(app) as url:
        yield url
