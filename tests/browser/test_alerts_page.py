"""The alerts page in a real browser, on a real backend: an operator manages rules and
a webhook endpoint through the forms, a test notification reaches a real receiver
signed with the secret the page showed once; a viewer sees it all read-only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from onceover.bigquery import BigQueryConfig
from tests.backend import factory
from tests.backend.conftest import INGEST, OPERATOR, VIEWER
from tests.browser.dashboard import screenshot, sign_in
from tests.conftest import REPO_ROOT
from tests.helpers.webhook_receiver import WebhookReceiver
from tests.jobs.orders import control_plane, served

pytestmark = pytest.mark.browser

DIST = REPO_ROOT / "frontend" / "dist"


# Tests take `page` after `backend_url`: the page (and its open change stream) then
# closes before the server stops, which otherwise waits 30 s for that stream to end.
@pytest.fixture
def backend_url(bq_config: BigQueryConfig, tmp_path: Path) -> Iterator[str]:
    assert (DIST / "index.html").is_file(), "run `make frontend` first"
    app = control_plane(
        bq_config,
        tmp_path,
        frontend_dist=DIST,
        webhook_poll_s=0.2,
        alert_eval_interval_s=0.5,  # an alert fires within a second of what makes it
    )
    with served(app) as url:
        yield url


def _api(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    """The backend's answer, asked directly: what the page did, as the API sees it."""
    response = httpx.request(
        method, f"{base}{path}", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.is_success, response.text
    return response.json() if response.content else None


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """A rule's params without those left unset (the API answers them as null)."""
    return {name: value for name, value in params.items() if value is not None}


def _sign_in(page: Page, url: str, token: str) -> None:
    sign_in(page, url, token, "/alerts")
    expect(page.get_by_role("heading", name="Alerts", level=1)).to_be_visible()


def _tab(page: Page, name: str) -> None:
    tab = page.get_by_role("navigation", name="Alerts sections").get_by_role("link", name=name)
    tab.click()
    expect(tab).to_have_attribute("aria-current", "page")


def _rule_row(page: Page, name: str) -> Locator:
    return page.get_by_test_id("rule-row").filter(has_text=name)


def test_alerts_operator_manages_rules_and_webhook_test_is_delivered(
    backend_url: str, hook: WebhookReceiver, page: Page
) -> None:
    _sign_in(page, backend_url, OPERATOR)
    expect(page.get_by_text("No alerts are firing or pending.")).to_be_visible()
    expect(page.get_by_text("No alert has fired yet.")).to_be_visible()

    # A rule through the form; the backend's 422 (error_rate needs a threshold) is
    # shown next to the field it names, then the rule is created once it is given.
    _tab(page, "Rules")
    expect(page.get_by_text("No rules yet.")).to_be_visible()
    page.get_by_role("button", name="New rule").click()
    assert "edit=new" in page.url
    form = page.get_by_test_id("rule-form")
    form.get_by_label("Name", exact=True).fill("orders errors")
    form.get_by_label("Kind").select_option("error_rate")
    form.get_by_role("button", name="Create rule").click()
    expect(page.get_by_test_id("rule-params-threshold-error")).to_have_text(
        "error_rate rules need a threshold"
    )
    form.get_by_label("Threshold", exact=True).fill("0.5")
    form.get_by_label("Threshold per").select_option("share")
    form.get_by_label("Scope").select_option("job")
    form.get_by_label("Job name").fill("orders")
    form.get_by_label("Severity").select_option("critical")
    form.get_by_role("button", name="Create rule").click()
    expect(page.get_by_test_id("rules-notice")).to_have_text("Rule “orders errors” created.")
    expect(_rule_row(page, "orders errors")).to_contain_text("threshold=0.5 · per=share")
    [rule] = _api(backend_url, VIEWER, "GET", "/api/alert-rules")["data"]
    assert _given(rule["params"]) == {"threshold": 0.5, "per": "share"}
    assert (rule["scope"], rule["scope_value"], rule["severity"]) == ("job", "orders", "critical")

    # Edit: the form holds the rule; saving replaces it whole.
    page.get_by_role("button", name="Edit rule orders errors").click()
    form = page.get_by_test_id("rule-form")
    expect(form.get_by_label("Name", exact=True)).to_have_value("orders errors")
    form.get_by_label("Name", exact=True).fill("orders error rate")
    form.get_by_label("Threshold", exact=True).fill("0.25")
    form.get_by_role("button", name="Save rule").click()
    expect(page.get_by_test_id("rules-notice")).to_have_text("Rule “orders error rate” saved.")
    expect(_rule_row(page, "orders error rate")).to_contain_text("threshold=0.25")
    [rule] = _api(backend_url, VIEWER, "GET", "/api/alert-rules")["data"]
    assert rule["name"] == "orders error rate"
    assert _given(rule["params"]) == {"threshold": 0.25, "per": "share"}

    # An endpoint through the form: its secret is shown once; the receiver verifies
    # signatures with exactly what the page showed.
    _tab(page, "Webhooks")
    page.get_by_role("button", name="New endpoint").click()
    form = page.get_by_test_id("webhook-form")
    form.get_by_label("Name", exact=True).fill("pager")
    form.get_by_label("URL").fill(hook.url)
    form.get_by_role("button", name="Create endpoint").click()
    box = page.get_by_test_id("secret-box")
    expect(box).to_contain_text("Shown once, copy it now")
    secret = page.get_by_test_id("webhook-secret").inner_text().strip()
    assert secret.startswith("whsec_"), secret
    hook.secret = secret
    panel = page.get_by_test_id("endpoint-panel")
    expect(panel.get_by_role("heading", name="Deliveries to “pager”")).to_be_visible()
    expect(panel.get_by_text("No deliveries yet.")).to_be_visible()

    panel.get_by_role("button", name="Send test").click()
    expect(page.get_by_test_id("endpoint-notice")).to_have_text(
        "Test sent to “pager”: succeeded (HTTP 200)."
    )
    delivery = panel.get_by_test_id("delivery-row")
    expect(delivery).to_have_count(1)
    expect(delivery).to_have_attribute("data-status", "succeeded")
    expect(delivery.get_by_text("succeeded", exact=True)).to_be_visible()
    expect(delivery).to_contain_text("test")
    screenshot(page, "alerts-webhook-secret-and-test-delivery")
    [received] = hook.wait_for(1)
    assert received.verified, received.headers
    assert received.json()["alerts"][0]["labels"]["alertname"] == "OnceoverTestNotification"

    # Redeliver: the same message (same webhook-id) as a new delivery.
    delivery.get_by_role("button", name="Redeliver").click()
    expect(panel.get_by_test_id("delivery-row")).to_have_count(2)
    expect(panel.get_by_test_id("delivery-row").first).to_contain_text("redelivery")
    expect(panel.get_by_test_id("delivery-row").first).to_have_attribute("data-status", "succeeded")
    first, again = hook.wait_for(2)
    assert again.verified
    assert again.message_id == first.message_id

    # The secret was shown once: a fresh load of the same view no longer has it.
    page.reload()
    expect(page.get_by_test_id("endpoint-panel")).to_be_visible()
    expect(page.get_by_test_id("secret-box")).to_have_count(0)

    # Delete the rule, confirming in the dialog.
    _tab(page, "Rules")
    page.get_by_role("button", name="Delete rule orders error rate").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete rule").click()
    expect(page.get_by_test_id("rules-notice")).to_contain_text("deleted")
    expect(page.get_by_text("No rules yet.")).to_be_visible()
    assert _api(backend_url, VIEWER, "GET", "/api/alert-rules")["data"] == []


def test_alerts_viewer_sees_a_firing_alert_and_everything_read_only(
    backend_url: str, hook: WebhookReceiver, page: Page
) -> None:
    rule_body = {"name": "orders failed", "kind": "run_failed", "severity": "critical"}
    rule = _api(backend_url, OPERATOR, "POST", "/api/alert-rules", rule_body)
    endpoint_body = {"name": "pager", "url": hook.url}
    endpoint = _api(backend_url, OPERATOR, "POST", "/api/webhooks", endpoint_body)
    _api(backend_url, OPERATOR, "POST", f"/api/webhooks/{endpoint['id']}/test")
    run = [factory.started("r-failed", "a1", 0), factory.failed("r-failed", "a1", 10, "died")]
    _api(backend_url, INGEST, "POST", "/api/events", factory.as_json(run))

    # The failed run's alert fires at the next evaluation (every 0.5 s here); its
    # notification reaching the receiver (after the test one) says it has.
    assert hook.wait_for(2)[1].json()["alerts"][0]["labels"]["alertname"] == "orders failed"
    _sign_in(page, backend_url, VIEWER)
    expect(page.get_by_text("Read only")).to_be_visible()
    alert = page.get_by_test_id("current-alerts").get_by_test_id("alert-row")
    expect(alert).to_contain_text("orders failed")
    expect(alert.locator("[data-status=firing]")).to_have_text("firing")
    expect(alert.locator("[data-severity=critical]")).to_be_visible()
    expect(alert.get_by_role("link", name="r-failed")).to_have_attribute("href", "/runs/r-failed")
    table_link = alert.get_by_role("link", name=factory.TABLE)
    expect(table_link).to_have_attribute("href", f"/tables/{factory.TABLE}")
    history = page.get_by_test_id("alert-history")
    expect(history.get_by_role("row").filter(has_text="orders failed")).to_have_count(1)
    screenshot(page, "alerts-firing")

    # The state filter is in the URL.
    page.get_by_label("State").select_option("resolved")
    expect(page.get_by_text("No resolved alerts.")).to_be_visible()
    assert "state=resolved" in page.url
    page.goto(f"{backend_url}/alerts?state=firing")
    expect(alert).to_contain_text("orders failed")

    # Even a link to the rule form shows no form to a viewer.
    page.goto(f"{backend_url}/alerts?tab=rules&edit={rule['id']}")
    expect(_rule_row(page, "orders failed")).to_be_visible()
    expect(page.get_by_test_id("rule-form")).to_have_count(0)

    page.goto(f"{backend_url}/alerts?tab=webhooks&endpoint={endpoint['id']}")
    test_delivery = page.get_by_test_id("delivery-row").filter(has_text="test")
    expect(test_delivery).to_have_attribute("data-status", "succeeded")
    expect(page.get_by_test_id("webhook-row")).to_contain_text(endpoint["secret_hint"])
    # Each tab with its content loaded (so missing buttons are missing, not late).
    loaded = {
        "Alerts": page.get_by_test_id("alert-row"),
        "Rules": _rule_row(page, "orders failed"),
        "Webhooks": page.get_by_test_id("webhook-row"),
    }
    for tab, content in loaded.items():
        _tab(page, tab)
        expect(content).to_be_visible()
        if tab == "Webhooks":  # the tab link drops the selection: select the endpoint again
            page.get_by_role("link", name="pager").click()
            expect(test_delivery).to_be_visible()
        for name in (
            "New rule", "Edit", "Delete", "New endpoint", "Send test", "Redeliver",
            "Rotate secret", "Disable", "Enable",
        ):  # fmt: skip
            expect(page.get_by_role("button", name=name)).to_have_count(0)
