"""Single sign-on in Chromium, through a real OpenID Provider run locally (panva's
oidc-provider, its own login form): a viewer signs in, sees the runs, is refused an
operator action, signs out; an operator signs in, resumes a run; the audit log names
the person. A person in no mapped group is refused with a page saying why."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from playwright.sync_api import Browser, Page, expect
from pydantic import SecretStr

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from onceover.preflight import free_port
from tests.backend import factory
from tests.backend.conftest import INGEST, OPERATOR, bearer
from tests.browser.conftest import DIST
from tests.browser.dashboard import VIEWPORT, screenshot
from tests.helpers.oidc_provider import CLIENT_ID, CLIENT_SECRET, ROLES, oidc_provider
from tests.jobs.orders import control_plane, served

RUN = "sso-run"


@dataclass(frozen=True)
class Stack:
    url: str
    app: FastAPI


@pytest.fixture
def stack(bq_config: BigQueryConfig, tmp_path: Path) -> Iterator[Stack]:
    provider_port = free_port()
    app = control_plane(
        bq_config, tmp_path, frontend_dist=DIST, reconcile_on_success=False,
        oidc_issuer=f"http://127.0.0.1:{provider_port}", oidc_client_id=CLIENT_ID,
        oidc_client_secret=SecretStr(CLIENT_SECRET), oidc_roles=ROLES,
        oidc_scopes="openid email groups", oidc_provider_name="Local IdP",
    )  # fmt: skip
    with served(app) as url:
        app.state.settings.public_url = url  # the redirect URI the provider knows
        app.state.settings.launch_monitor_url = url  # what `onceover serve` sets
        with oidc_provider(provider_port, f"{url}/auth/callback", tmp_path / "idp.log"):
            # A failed run with a launch spec: resuming it starts a job that ends at
            # once (its own --help), which is all a resume's audit needs.
            (tmp_path / "ckpt").mkdir()
            spec = ev.JobSpec(module="onceover_jobs.load_files", args=["--help"],
                              checkpoint=str(tmp_path / "ckpt"))  # fmt: skip
            events = [
                factory.started(RUN, "a1", 0).model_copy(update={"spec": spec}),
                factory.failed(RUN, "a1", 5, "the driver died"),
            ]
            posted = httpx.post(f"{url}/api/events", json=factory.as_json(events),
                                headers=bearer(INGEST), timeout=30)  # fmt: skip
            assert posted.is_success, posted.text
            yield Stack(url, app)


def sign_in_as(page: Page, stack: Stack, person: str, path: str) -> None:
    """The sign-in page's single sign-on button, then the provider's own login form."""
    page.goto(f"{stack.url}{path}")
    page.get_by_role("link", name="Sign in with Local IdP").click()
    page.locator("input[name=login]").fill(person)
    page.locator("input[name=password]").fill("any password")
    page.locator("button[type=submit]").click()
    consent = page.locator("button[type=submit]", has_text="Continue")
    if consent.count():  # the provider asks once per person and client
        consent.click()


def _csrf_post(page: Page, path: str) -> Any:
    """A write from the page's own session, as the dashboard sends it."""
    return page.evaluate(
        """async (path) => {
            const me = await (await fetch("/api/session")).json();
            const answer = await fetch(path, {method: "POST",
                headers: {"X-CSRF-Token": me.csrf_token}});
            return {status: answer.status, body: await answer.text()};
        }""",
        path,
    )


def test_a_viewer_and_an_operator_sign_in_through_the_identity_provider(
    browser: Browser, stack: Stack
) -> None:
    viewer = browser.new_context(viewport=VIEWPORT).new_page()
    sign_in_as(viewer, stack, "vera", "/runs")
    expect(viewer.get_by_test_id("signed-in-as")).to_contain_text("sso:vera@example.com")
    expect(viewer.get_by_test_id("signed-in-as")).to_contain_text("viewer")
    assert viewer.url == f"{stack.url}/runs"  # back where the sign-in started
    expect(viewer.get_by_test_id("run-row").filter(has_text=RUN)).to_be_visible()
    viewer.get_by_role("link", name=RUN).click()
    expect(viewer.get_by_test_id("run-status")).to_contain_text("failed")
    expect(viewer.get_by_role("button", name="Resume", exact=True)).to_have_count(0)
    refused = _csrf_post(viewer, f"/api/runs/{RUN}/resume")
    assert refused["status"] == 403, refused
    assert "operator" in refused["body"]
    screenshot(viewer, "sso-viewer")
    viewer.get_by_role("button", name="Sign out").click()
    expect(viewer.get_by_role("link", name="Sign in with Local IdP")).to_be_visible()
    # Signed out on the server: the session's cookie opens nothing any more.
    assert viewer.evaluate("async () => (await fetch('/api/session')).status") == 401

    operator = browser.new_context(viewport=VIEWPORT).new_page()
    sign_in_as(operator, stack, "otto", f"/runs/{RUN}")
    expect(operator.get_by_test_id("signed-in-as")).to_contain_text("sso:otto@example.com")
    operator.get_by_role("button", name="Resume", exact=True).click()
    dialog = operator.get_by_role("dialog")
    dialog.get_by_role("button", name="Resume run").click()
    expect(operator.get_by_test_id("run-notice")).to_contain_text("attempt 2")

    operator.get_by_role("navigation", name="Main").get_by_role("link", name="Audit log").click()
    resume_row = operator.get_by_role("row").filter(has_text="resumeRun")
    expect(resume_row.first).to_contain_text("sso:otto@example.com")
    screenshot(operator, "sso-audit")
    entries = httpx.get(f"{stack.url}/api/audit", params={"action": "resumeRun"},
                        headers=bearer(OPERATOR), timeout=10).json()  # fmt: skip
    # The viewer's refusal, the operator's plan (a dry run) and the resume, each by name
    # and subject at the provider (its account id).
    assert sorted((e["actor"], e["subject"], e["status_code"]) for e in entries["data"]) == [
        ("sso:otto@example.com", "otto", 200),
        ("sso:otto@example.com", "otto", 202),
        ("sso:vera@example.com", "vera", 403),
    ]
    signed_in = httpx.get(f"{stack.url}/api/audit", params={"action": "ssoSignIn"},
                          headers=bearer(OPERATOR), timeout=10).json()  # fmt: skip
    assert sorted(e["actor"] for e in signed_in["data"]) == [
        "sso:otto@example.com", "sso:vera@example.com"
    ]  # fmt: skip


def test_a_person_in_no_mapped_group_is_refused_with_a_page_saying_why(
    page: Page, stack: Stack
) -> None:
    sign_in_as(page, stack, "mallory", "/runs")
    expect(page.get_by_role("heading", name="No access to Onceover")).to_be_visible()
    expect(page.locator("#reason")).to_contain_text("mallory@example.com signed in")
    expect(page.locator("#reason")).to_contain_text("marketing")
    expect(page.get_by_role("link", name="Sign in again")).to_be_visible()
