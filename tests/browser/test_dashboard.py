"""The dashboard in a real Chromium against a real backend holding real job runs.

Jobs are ``python -m onceover_jobs.load_files`` (Spark local, the local BigQuery), the backend is
the app on a socket serving the built dashboard, and BigQuery's rows are counted with our
own queries. The must-show: a run crashed at ``commit.after`` is resumed from its page
with the Resume button, and the page shows it ``succeeded`` with reconciliation ``ok``
without a reload.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from google.cloud import bigquery
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_jobs.generate import write_files
from playwright.sync_api import Browser, Page, expect

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from tests.backend import factory
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.backend.live import wait_for_status
from tests.browser.dashboard import VIEWPORT, go_to, screenshot, sign_in
from tests.conftest import REPO_ROOT
from tests.jobs.orders import control_plane, counted_keys, crashed_run, load_orders, served

pytestmark = [pytest.mark.browser, pytest.mark.spark]

ROWS = 3_000
JOB_MS = 240_000  # a job or a resume, start to end, on the 2-core machine
CHECK_MS = 60_000  # a reconciliation after the run ends


@dataclass
class Stack:
    app: FastAPI
    url: str
    work: Path
    dataset: str


@dataclass
class FinishedRun:
    run_id: str
    table: str


@pytest.fixture(scope="module")
def stack(
    bq_config: BigQueryConfig, rest: bigquery.Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    dist = REPO_ROOT / "frontend" / "dist"
    assert (dist / "index.html").is_file(), "run `make frontend` first"
    work = tmp_path_factory.mktemp("dashboard")
    dataset = f"{rest.project}.t_{uuid.uuid4().hex[:12]}"
    rest.create_dataset(dataset)
    app = control_plane(bq_config, work, frontend_dist=dist)
    try:
        with served(app) as url:
            app.state.settings.launch_monitor_url = url  # what `onceover serve` sets
            yield Stack(app, url, work, dataset)
    finally:
        rest.delete_dataset(dataset, delete_contents=True, not_found_ok=True)


@pytest.fixture(scope="module")
def finished_run(stack: Stack, bq_config: BigQueryConfig) -> FinishedRun:
    """A run that loaded ROWS rows without a fault, and was reconciled by itself."""
    work = stack.work / "finished"
    source = work / "orders"
    write_files(source, ROWS, 4, "json")
    table = f"{stack.dataset}.finished"
    done = load_orders(bq_config, stack.url, source, table, work, extra=["--stamp"])
    assert done.returncode == 0, done.stderr[-3000:]
    run_id = (work / "ckpt" / "onceover" / "run_id").read_text().strip()
    assert wait_for_status(stack.url, VIEWER, run_id, "succeeded")["status"] == "succeeded"
    return FinishedRun(run_id, table)


def _api(stack: Stack, path: str) -> Any:
    response = httpx.get(f"{stack.url}{path}", headers=bearer(VIEWER), timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _count_full_loads(page: Page) -> list[str]:
    """Every full page load from now on (a reload would be one; the app's own
    navigation is not)."""
    loads: list[str] = []
    page.on("load", lambda _page: loads.append(page.url))
    return loads


def _assert_run_page_equals_api(page: Page, detail: dict[str, Any]) -> None:
    expect(page.get_by_test_id("run-status")).to_have_text(detail["status"])
    expected = {
        "run-rows-committed": detail["rows_committed"],
        "run-batches-committed": detail["batches_committed"],
        "run-already-exists": detail["already_exists"],
        "run-out-of-range": detail["out_of_range"],
    }
    for test_id, number in expected.items():
        expect(page.get_by_test_id(test_id)).to_have_text(f"{number:,}")
    expect(page.get_by_test_id("batch-row")).to_have_count(len(detail["batches"]))
    expect(page.get_by_test_id("stream-row")).to_have_count(len(detail["streams"]))
    expect(page.get_by_test_id("attempt-row")).to_have_count(len(detail["attempts"]))


def test_a_crashed_run_is_resumed_from_its_page_and_shows_succeeded_and_ok(
    page: Page, stack: Stack, bq_config: BigQueryConfig, rest: bigquery.Client
) -> None:
    sign_in(page, stack.url, OPERATOR)
    expect(page.get_by_role("heading", name="Runs")).to_be_visible()
    rows_before = page.get_by_test_id("run-row").count()
    loads = _count_full_loads(page)

    # The job starts while the list is open: its row appears, running, without a reload.
    table = f"{stack.dataset}.crashed"
    crashed: dict[str, str] = {}

    def run_the_job() -> None:
        crashed["run_id"] = crashed_run(
            stack.app, stack.url, bq_config, stack.work, table, "commit.after", ROWS
        )

    job = threading.Thread(target=run_the_job)
    job.start()
    rows = page.get_by_test_id("run-row")
    expect(rows).to_have_count(rows_before + 1, timeout=JOB_MS)
    new_row = rows.filter(has_text=table)
    expect(new_row.locator('[data-status="running"]')).to_be_visible(timeout=JOB_MS)
    job.join(timeout=JOB_MS / 1000)
    run_id = crashed["run_id"]
    expect(new_row.locator('[data-status="failed"]')).to_be_visible(timeout=JOB_MS)
    screenshot(page, "runs-crashed")

    # Its page: the numbers are the API's.
    new_row.get_by_role("link", name=run_id).click()
    expect(page).to_have_url(f"{stack.url}/runs/{run_id}")
    _assert_run_page_equals_api(page, _api(stack, f"/api/runs/{run_id}"))
    # Before anyone opens the Resume dialog, the page shows the batch BigQuery committed
    # and the checkpoint lacks, with BigQuery's commit time as the proof.
    intents = page.get_by_test_id("intents-panel")
    expect(intents.get_by_test_id("intent-in-bigquery")).to_contain_text(
        "Committed in BigQuery, not in the checkpoint · committed "
    )
    screenshot(page, "run-failed")

    # Resume: the dialog shows the dry-run plan, then the run resumes.
    page.get_by_role("button", name="Resume", exact=True).click()
    dialog = page.get_by_role("dialog")
    plan = _api_plan(stack, run_id)
    expect(dialog.get_by_test_id("plan-committed")).to_have_text(
        f"{plan['committed_rows']:,} rows in {plan['committed_batches']:,} batches"
    )
    # The driver died right after BigQuery committed a batch: BigQuery holds it, the
    # checkpoint does not, and the plan says so with BigQuery's commit time as proof.
    (intent,) = plan["pending_intents"]
    assert (intent["in_bigquery"], bool(intent["commit_time"])) == ("committed", True)
    expect(dialog.get_by_test_id("intent-in-bigquery")).to_contain_text(
        "Committed in BigQuery, not in the checkpoint"
    )
    expect(dialog.get_by_test_id("intent-resume-will")).to_contain_text("skip it")
    screenshot(page, "resume-dialog")
    dialog.get_by_role("button", name="Resume run").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("run-notice")).to_contain_text("attempt 2")

    # The page follows the resume live: succeeded, then the automatic check says ok.
    expect(page.get_by_test_id("run-status")).to_have_text("succeeded", timeout=JOB_MS)
    expect(page.get_by_test_id("reconciliation-status")).to_have_text("ok", timeout=CHECK_MS)
    expect(page.get_by_test_id("reconciliation-expected")).to_have_text(f"{ROWS:,}")
    expect(page.get_by_test_id("reconciliation-actual")).to_have_text(f"{ROWS:,}")
    expect(page.get_by_test_id("reconciliation-distinct")).to_have_text(f"{ROWS:,}")
    detail = _api(stack, f"/api/runs/{run_id}")
    assert [a["status"] for a in detail["attempts"]] == ["failed", "succeeded"]
    _assert_run_page_equals_api(page, detail)
    assert loads == [], f"the page was reloaded: {loads}"
    assert counted_keys(rest, table) == (ROWS, ROWS)  # BigQuery's own count
    screenshot(page, "run-resumed")

    # The batch timeline: a batch chosen there opens its receipt in the commit history.
    committed = [b for b in detail["batches"] if b["state"] == "committed"]
    assert len(committed) >= 2, committed
    page.get_by_test_id("timeline-open").get_by_role("button").click()
    receipt = page.get_by_test_id("batch-receipt")
    expect(receipt).to_be_visible()
    expect(receipt).to_contain_text("Key checksum")


def _api_plan(stack: Stack, run_id: str) -> Any:
    response = httpx.post(
        f"{stack.url}/api/runs/{run_id}/resume?dry_run=true", headers=bearer(OPERATOR), timeout=60
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_reconcile_now_shows_a_mismatch_after_a_duplicate_is_inserted(
    page: Page, stack: Stack, finished_run: FinishedRun, rest: bigquery.Client
) -> None:
    sign_in(page, stack.url, OPERATOR, f"/runs/{finished_run.run_id}")
    expect(page.get_by_test_id("reconciliation-status")).to_have_text("ok", timeout=CHECK_MS)

    key = 17
    rest.query(
        f"INSERT INTO `{finished_run.table}` (event_id) VALUES (@key)",
        job_config=bigquery.QueryJobConfig(
            query_parameters=[bigquery.ScalarQueryParameter("key", "INT64", key)]
        ),
    ).result()
    page.get_by_role("button", name="Reconcile now").click()

    expect(page.get_by_test_id("reconciliation-status")).to_have_text("mismatch", timeout=CHECK_MS)
    # The copy carries no run stamp: not one of the run's rows, an extra one in its table.
    expect(page.get_by_test_id("reconciliation-actual")).to_have_text(f"{ROWS:,}")
    expect(page.get_by_test_id("reconciliation-extra")).to_have_text("1")
    duplicates = page.get_by_test_id("duplicate-keys")
    expect(duplicates.get_by_role("row").filter(has_text=str(key))).to_contain_text("2")
    expect(page.get_by_test_id("run-notice")).to_contain_text("Reconciled: mismatch")
    screenshot(page, "run-mismatch")

    # The list shows the new verdict too, and the audit log who asked for it.
    go_to(page, "Runs")
    row = page.get_by_test_id("run-row").filter(has_text=finished_run.run_id)
    expect(row.get_by_test_id("run-verdict")).to_have_text("mismatch")
    go_to(page, "Audit log")
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    expect(
        page.get_by_role("row").filter(has_text=f"/api/runs/{finished_run.run_id}/reconcile")
    ).not_to_have_count(0)
    screenshot(page, "audit")


def test_a_scripts_failed_run_says_why_it_is_not_resumed_here(page: Page, stack: Stack) -> None:
    """A run the sink reported for a user's own script has no launch spec: the page
    offers no resume and says why."""
    script_run = [
        factory.started("nightly-script", "driver-1", 0).model_copy(update={"spec": None}),
        factory.failed("nightly-script", "driver-1", 5, "Spark aborted the write"),
    ]
    posted = httpx.post(f"{stack.url}/api/events", json=factory.as_json(script_run),
                        headers=bearer(INGEST), timeout=30)  # fmt: skip
    assert posted.is_success, posted.text
    sign_in(page, stack.url, OPERATOR, "/runs/nightly-script")
    expect(page.get_by_test_id("run-status")).to_contain_text("failed")
    expect(page.get_by_test_id("resume-unavailable")).to_contain_text(
        "reported no launch spec: it was written by a script of its own"
    )
    expect(page.get_by_role("button", name="Resume", exact=True)).to_be_disabled()


def test_a_viewer_sees_runs_and_tables_but_no_operator_action(
    page: Page, stack: Stack, finished_run: FinishedRun
) -> None:
    page.goto(f"{stack.url}/runs")
    page.get_by_label("Token").fill("oo_not-a-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("not valid")

    sign_in(page, stack.url, VIEWER)
    expect(page.get_by_test_id("run-row").filter(has_text=finished_run.run_id)).to_be_visible()
    screenshot(page, "runs")
    page.get_by_role("link", name=finished_run.run_id).click()
    _assert_run_page_equals_api(page, _api(stack, f"/api/runs/{finished_run.run_id}"))
    expect(page.get_by_role("button", name="Resume", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Reconcile now")).to_have_count(0)
    expect(page.get_by_role("link", name="Audit log")).to_have_count(0)

    # Tables: the totals are the API's.
    go_to(page, "Tables")
    tables = {t["table"]: t for t in _api(stack, "/api/tables")["data"]}
    row = page.get_by_test_id("table-row").filter(has_text=finished_run.table)
    expect(row.get_by_test_id("table-rows-committed")).to_have_text(
        f"{tables[finished_run.table]['rows_committed']:,}"
    )
    screenshot(page, "tables")
    expect(page.get_by_role("button", name="Reconcile table")).to_have_count(0)


def test_signing_in_and_moving_around_by_keyboard_in_dark_mode(
    browser: Browser, stack: Stack
) -> None:
    context = browser.new_context(viewport=VIEWPORT, color_scheme="dark")
    page = context.new_page()
    try:
        page.goto(f"{stack.url}/tables")
        # The form is rendered by the app after load: a Tab pressed before it exists
        # focuses nothing (CI under load did exactly that).
        expect(page.get_by_label("Token")).to_be_visible()
        page.keyboard.press("Tab")
        expect(page.get_by_label("Token")).to_be_focused()
        page.keyboard.type(VIEWER)
        page.keyboard.press("Enter")
        expect(page.get_by_test_id("signed-in-as")).to_contain_text("viewer")
        expect(page.get_by_role("heading", name="Tables", exact=True)).to_be_visible()

        page.keyboard.press("Tab")  # the first stop skips the navigation
        skip = page.get_by_role("link", name="Skip to content")
        expect(skip).to_be_focused()
        page.keyboard.press("Tab")
        main_nav = page.get_by_role("navigation", name="Main")
        expect(main_nav.get_by_role("link", name="Overview")).to_be_focused()
        page.keyboard.press("Tab")
        runs = main_nav.get_by_role("link", name="Runs")
        expect(runs).to_be_focused()
        page.keyboard.press("Enter")
        expect(page).to_have_url(f"{stack.url}/runs")

        # The system says dark: the page is dark, its text light.
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        text = page.evaluate("getComputedStyle(document.querySelector('h1')).color")
        assert _luminance(background) < 0.1, background
        assert _luminance(text) > 0.8, text
        screenshot(page, "runs-dark")
    finally:
        context.close()


def _luminance(css_rgb: str) -> float:
    red, green, blue = (int(c) for c in css_rgb[css_rgb.index("(") + 1 : -1].split(",")[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def _post_events(stack: Stack, events: Sequence[ev.Event], table: str, at: datetime) -> None:
    """``events`` (built at factory.T0) as a job would send them: into ``table``, moved so
    that T0 falls at ``at``, by a script of its own (no launch spec: nothing resumes it)."""
    by = at - factory.T0
    moved = [e.model_copy(update={"table": table, "time": e.time + by}) for e in events]
    moved = [e.model_copy(update={"spec": None}) if isinstance(e, ev.RunStarted) else e
             for e in moved]  # fmt: skip
    posted = httpx.post(f"{stack.url}/api/events", json=factory.as_json(moved),
                        headers=bearer(INGEST), timeout=30)  # fmt: skip
    assert posted.is_success, posted.text


def test_the_overview_shows_a_failed_run_a_firing_alert_and_a_stale_table_on_one_screen(
    browser: Browser, page: Page, stack: Stack, finished_run: FinishedRun
) -> None:
    """The home page, beside the module's real runs: a job that last committed three days
    ago and then failed (its table stale), and an alert rule firing on it."""
    stale = f"{stack.dataset}.invoices"
    run_id = f"invoices-{uuid.uuid4().hex[:6]}"
    nightly: list[ev.Event] = [
        factory.started(run_id, "driver-1", 0),
        factory.intent(run_id, 0, 5, [f"{run_id}/s1"], 40),
        factory.committed(run_id, 0, 6, [f"{run_id}/s1"], 40),
        factory.failed(run_id, "driver-1", 9, "Quota exceeded: too many tables"),
    ]
    _post_events(stack, nightly, stale, datetime.now(UTC) - timedelta(days=3, minutes=1))
    rule = httpx.post(
        f"{stack.url}/api/alert-rules",
        json={"name": f"{stale} failed", "kind": "run_failed", "scope": "table",
              "scope_value": stale, "severity": "critical"},
        headers=bearer(OPERATOR), timeout=30,
    )  # fmt: skip
    assert rule.status_code == 201, rule.text
    assert evaluate(stack.app.state.engine, stack.url) is not None  # a round now, not in 15 s

    sign_in(page, stack.url, VIEWER, "/")
    expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()
    failed = page.locator(f'[data-testid="attention-run"][data-run-id="{run_id}"]')
    alert = page.get_by_test_id("firing-alert").filter(has_text=run_id)
    stale_row = page.locator(f'[data-testid="overview-table"][data-table="{stale}"]')
    fresh_row = page.locator(f'[data-testid="overview-table"][data-table="{finished_run.table}"]')
    # All on one screen (the 1280 by 800 viewport), whole: no scrolling to find what is wrong.
    for shown in (failed, alert, stale_row, fresh_row):
        expect(shown).to_be_in_viewport(ratio=1)
    expect(failed).to_have_attribute("data-status", "failed")
    expect(failed).to_contain_text("Quota exceeded")
    expect(stale_row).to_have_attribute("data-freshness", "stale")
    expect(stale_row).to_contain_text("last commit 3 d")
    expect(fresh_row).to_have_attribute("data-freshness", "fresh")
    expect(fresh_row.get_by_test_id("table-rows-today")).to_have_text(f"{ROWS:,}")
    # Each item links to its page.
    expect(alert.get_by_role("link", name=f"{stale} failed")).to_have_attribute(
        "href", f"/alerts?state=firing&rule={rule.json()['id']}"
    )
    expect(alert.get_by_role("link", name=run_id, exact=True)).to_have_attribute(
        "href", f"/runs/{run_id}"
    )
    expect(stale_row.get_by_test_id("overview-table-link")).to_have_attribute(
        "href", f"/tables/{stale}"
    )
    screenshot(page, "overview")

    # Live: a run that fails now appears without a reload.
    loads = _count_full_loads(page)
    retry_id = f"{run_id}-retry"
    _post_events(stack, [factory.started(retry_id, "driver-1", 0),
                         factory.failed(retry_id, "driver-1", 1, "Quota exceeded again")],
                 stale, datetime.now(UTC) - timedelta(seconds=5))  # fmt: skip
    expect(page.locator(f'[data-testid="attention-run"][data-run-id="{retry_id}"]')).to_be_visible()
    assert loads == [], f"the page was reloaded: {loads}"

    # By keyboard: skip the navigation, Tab to the failed run's link (visibly focused),
    # Enter opens its page.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    run_link = failed.get_by_role("link", name=run_id, exact=True)
    for _ in range(40):
        page.keyboard.press("Tab")
        if run_link.evaluate("link => link === document.activeElement"):
            break
    expect(run_link).to_be_focused()
    assert run_link.evaluate("link => getComputedStyle(link).outlineStyle") != "none"
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{stack.url}/runs/{run_id}")
    expect(page.get_by_test_id("run-status")).to_contain_text("failed")
    assert loads == [], f"the page was reloaded: {loads}"

    # Dark mode: the same screen, dark, its badges readable.
    context = browser.new_context(viewport=VIEWPORT, color_scheme="dark")
    dark = context.new_page()
    try:
        sign_in(dark, stack.url, VIEWER, "/")
        row = dark.locator(f'[data-testid="overview-table"][data-table="{stale}"]')
        expect(row).to_be_in_viewport(ratio=1)
        background = dark.evaluate("getComputedStyle(document.body).backgroundColor")
        badge = row.get_by_test_id("table-freshness")
        assert _luminance(background) < 0.1, background
        assert _luminance(badge.evaluate("b => getComputedStyle(b).color")) > 0.6
        screenshot(dark, "overview-dark")
    finally:
        context.close()
