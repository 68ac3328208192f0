"""The run page in a real browser shows the rows a run set aside in its dead-letter table,
from events a job sent to a real backend (no Spark: the events are the sink's own shape)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.backend import factory
from tests.backend.conftest import INGEST, VIEWER
from tests.browser.dashboard import screenshot, sign_in

pytestmark = pytest.mark.browser

DLQ = "onceover-local.ds.orders_dead_letters"


def test_the_run_page_shows_the_rows_set_aside_and_why(backend_url: str, page: Page) -> None:
    run, streams = "r-dead-letters", ["r-dead-letters/s1", "r-dead-letters/s2"]
    aside: dict[str, Any] = {
        "dead_lettered": 3, "dead_letter_table": DLQ, "dead_letter_streams": ["dlq/0"]
    }  # fmt: skip
    refused = [(17, "order-17", "note", "value too long for STRING(10)")]
    events = [
        factory.started(run, "a1", 0),
        factory.rejected(run, streams[0], 1, 0, refused, dead_letter_table=DLQ),
        factory.intent(run, 0, 2, streams, 50, **aside),
        factory.committed(run, 0, 3, streams, 50, **aside),
        factory.finished(run, "a1", 4, 100),
    ]
    posted = httpx.post(
        f"{backend_url}/api/events",
        json=factory.as_json(events),
        headers={"Authorization": f"Bearer {INGEST}"},
    )
    assert posted.json()["stored"] == 5, posted.text

    sign_in(page, backend_url, VIEWER, f"/runs/{run}")

    set_aside = page.get_by_test_id("run-rows-dead-lettered")
    expect(set_aside).to_have_text("3")
    expect(set_aside).to_have_attribute("title", f"3 row(s) BigQuery refused, set aside in {DLQ} "
                                        "exactly once by the committed batches (not in rows "
                                        "committed; the rest of each batch was loaded). 1 refused "
                                        "request(s) reported by the tasks (a retried task "
                                        "reports its rows again).")  # fmt: skip
    expect(page.get_by_test_id("run-rows-committed")).to_have_text("100")
    rejection = page.get_by_test_id("rejection-row")
    expect(rejection).to_have_count(1)
    expect(rejection.get_by_role("cell").nth(1)).to_have_text("order-17")
    expect(rejection.get_by_role("cell").nth(3)).to_have_text("value too long for STRING(10)")
    screenshot(page, "run-dead-letters")
