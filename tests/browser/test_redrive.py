"""An operator re-drives a run's set-aside rows from the run page in a real browser: the
button, the plan, the confirmation, the launch's answer, then the page counting the rows
the re-drive landed. The launched job is the real one, stopped at its first step (no JDK
where JAVA_HOME points) so no Spark runs here; the re-drive run's events are posted as
its sink would send them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from tests.backend import factory
from tests.backend.conftest import INGEST, OPERATOR
from tests.browser.conftest import DIST
from tests.browser.dashboard import screenshot, sign_in
from tests.jobs.orders import control_plane, served

pytestmark = pytest.mark.browser

DLQ = "onceover-local.ds.orders_dead_letters"
RUN = "r-redrive"


@pytest.fixture
def launching_url(
    bq_config: BigQueryConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A backend that launches jobs; they inherit a JAVA_HOME with no JDK in it."""
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    app = control_plane(
        bq_config, tmp_path, frontend_dist=DIST, reconcile_on_success=False,
        launch_monitor_url="http://127.0.0.1:9",
    )  # fmt: skip
    with served(app) as url:
        yield url


def post(url: str, events: list[ev.Event]) -> None:
    posted = httpx.post(
        f"{url}/api/events", json=factory.as_json(events),
        headers={"Authorization": f"Bearer {INGEST}"},
    )  # fmt: skip
    assert posted.status_code == 200, posted.text


def started(run_id: str, spec: ev.JobSpec | None, t: float) -> ev.RunStarted:
    return ev.RunStarted(
        attempt_id="a1", mode="pending", spec=spec, id=ev.event_id(run_id, "started"),
        time=factory.at(t), run_id=run_id, table=factory.TABLE, job="orders",
    )  # fmt: skip


def test_an_operator_re_drives_the_set_aside_rows_and_the_page_counts_them(
    launching_url: str, page: Page, tmp_path: Path
) -> None:
    spec = ev.JobSpec(module="onceover_jobs.load_files", args=[], checkpoint=str(tmp_path / "c"))
    aside = {"dead_lettered": 3, "dead_letter_table": DLQ, "dead_letter_streams": ["dlq/0"]}
    post(launching_url, [
        started(RUN, spec, 0),
        factory.committed(RUN, 0, 1, ["s1"], 50, **aside),  # type: ignore[arg-type]
        factory.finished(RUN, "a1", 2, 50),
    ])  # fmt: skip

    sign_in(page, launching_url, OPERATOR, f"/runs/{RUN}")
    page.get_by_role("button", name="Re-drive set-aside rows").click()

    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_test_id("redrive-plan-rows")).to_have_text("3")
    expect(dialog.get_by_test_id("redrive-plan-command")).to_contain_text(f"--dead-letter={DLQ}")
    expect(dialog.get_by_test_id("redrive-plan-command")).to_contain_text(
        f"--ledger={tmp_path / 'c' / 'onceover'}"
    )
    screenshot(page, "redrive-plan")
    dialog.get_by_role("button", name="Re-drive rows").click()
    expect(dialog.get_by_test_id("redrive-launched")).to_contain_text("Re-drive launch 1 started")
    dialog.get_by_role("button", name="Close").click()

    again = {"dead_lettered": 1, "dead_letter_table": DLQ, "dead_letter_streams": ["dlq/1"]}
    redrive = f"{RUN}:redrive-1"  # what the job's sink reports: 2 landed, 1 refused again
    post(launching_url, [
        started(redrive, None, 10),
        factory.committed(redrive, 0, 11, ["x1"], 2, **again),  # type: ignore[arg-type]
        factory.finished(redrive, "a1", 12, 2),
    ])  # fmt: skip

    expect(page.get_by_test_id("redrive-redriven")).to_have_text("2")
    expect(page.get_by_test_id("redrive-still-set-aside")).to_have_text("1")
    expect(page.get_by_test_id("redrive-runs")).to_contain_text(f"{redrive}")
    expect(page.get_by_test_id("redrive-runs")).to_contain_text("1 refused again")
    expect(page.get_by_test_id("redrive-last-launch")).to_contain_text("Last launch (1)")
    screenshot(page, "redrive-counted")
