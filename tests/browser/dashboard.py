"""Driving the dashboard: sign in, find things by what the page shows, keep screenshots."""

from __future__ import annotations

from playwright.sync_api import Page, ViewportSize, expect

from tests.conftest import ARTIFACTS

# The size the issue asks the views to work at.
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}


def sign_in(page: Page, url: str, token: str, path: str = "/runs") -> None:
    """Open ``path`` signed out, sign in with ``token`` on the form the app shows there."""
    page.goto(f"{url}{path}")
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_test_id("signed-in-as")).to_be_visible()


def screenshot(page: Page, name: str) -> None:
    """A whole-page picture kept in test-artifacts/ (the README shows some of them)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"dashboard-{name}.png"), full_page=True)


def go_to(page: Page, view: str) -> None:
    """Follow the main navigation's link to ``view`` (Runs, Tables, Alerts, Audit log)."""
    page.get_by_role("navigation", name="Main").get_by_role("link", name=view).click()
