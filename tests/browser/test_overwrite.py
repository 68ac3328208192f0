"""The run page in a real browser shows an overwrite that stopped with its swap asked for:
the step, what it replaced and the job, from events a job sent to a real backend (no Spark:
the events are the sink's own shape)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.backend import factory
from tests.backend.conftest import INGEST, VIEWER
from tests.browser.dashboard import screenshot, sign_in

pytestmark = pytest.mark.browser


def test_the_run_page_shows_where_an_overwrite_stopped_and_what_it_replaces(
    backend_url: str, page: Page
) -> None:
    run = "r-overwrite"
    events = factory.overwrite_run(run, "swap_asked", rows=100, partitions=["20261101", "__NULL__"])
    posted = httpx.post(
        f"{backend_url}/api/events",
        json=factory.as_json(events),
        headers={"Authorization": f"Bearer {INGEST}"},
    )
    assert posted.json()["stored"] == len(events), posted.text

    sign_in(page, backend_url, VIEWER, f"/runs/{run}")

    overwrite = page.get_by_test_id("overwrite")
    expect(overwrite).to_contain_text("stopped at Swap asked for")
    expect(overwrite).to_contain_text("the table holds the old rows or the new, never both")
    expect(page.get_by_test_id("overwrite-rows-replaced")).to_have_text("40")
    expect(page.get_by_test_id("overwrite-rows-inserted")).to_have_text("100")
    expect(page.get_by_test_id("overwrite-partitions")).to_have_text("20261101, __NULL__")
    expect(page.get_by_test_id("overwrite-job")).to_have_text(f"onceover_overwrite_{run}_0")
    expect(page.get_by_test_id("overwrite-scope")).to_have_text(
        "the rows of the partitions (by day) the new rows fall in"
    )
    screenshot(page, "run-overwrite")
