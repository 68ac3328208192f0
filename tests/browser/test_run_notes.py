"""The run page in a real browser says what BigQuery did to a run that the rows alone do
not show: its throughput quota throttled the appends, or it refused Arrow rows. From
events a job sent to a real backend (no Spark: the events are the sink's own shape;
tests/sink/test_appender.py and test_arrow_refused.py show the sink sends them against the
local BigQuery)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect
from pydantic import BaseModel

from tests.backend import factory
from tests.backend.conftest import INGEST, VIEWER
from tests.browser.dashboard import screenshot, sign_in

pytestmark = pytest.mark.browser


def _posted(backend_url: str, run: str, events: Sequence[BaseModel]) -> dict[str, Any]:
    """``events`` sent as a job sends them; the run as the API then answers it."""
    posted = httpx.post(
        f"{backend_url}/api/events",
        json=factory.as_json(events),
        headers={"Authorization": f"Bearer {INGEST}"},
    )
    assert posted.json()["stored"] == len(events), posted.text
    answer: dict[str, Any] = httpx.get(
        f"{backend_url}/api/runs/{run}", headers={"Authorization": f"Bearer {VIEWER}"}
    ).json()
    return answer


def test_the_run_page_says_the_throughput_quota_throttled_the_run(
    backend_url: str, page: Page
) -> None:
    run, stream = "r-throttled", "r-throttled/s1"
    events = [
        factory.started(run, "a1", 0),
        factory.created(run, stream, 1),
        factory.throttled(run, stream, 2, 0),
        *(
            factory.append_error(run, stream, 2 + t, "RESOURCE_EXHAUSTED", tried=n)
            for n, t in enumerate((0.0, 0.5, 1.5), start=1)
        ),
        factory.acked(run, stream, 40, 0, 10),
    ]
    detail = _posted(backend_url, run, events)
    assert detail["throttled"] == 3
    assert detail["throttled_at"].startswith(factory.at(2).isoformat()[:19])
    (listed,) = detail["streams"]
    assert listed["last_error"].startswith("RESOURCE_EXHAUSTED at offset 0")  # its last try

    sign_in(page, backend_url, VIEWER, f"/runs/{run}")

    note = page.get_by_test_id("run-throttled")
    expect(note).to_contain_text("Throttled by BigQuery's throughput quota: 3 append requests")
    expect(note).to_contain_text("retry.throttle_s")
    screenshot(page, "run-throttled")


def test_the_run_page_says_bigquery_refused_arrow_rows_and_they_went_as_proto(
    backend_url: str, page: Page
) -> None:
    run, stream = "r-arrow", "r-arrow/s1"
    events = [
        factory.started(run, "a1", 0),
        factory.created(run, stream, 1),
        factory.format_refused(run, stream, 2),
        factory.acked(run, stream, 3, 0, 10),
    ]
    detail = _posted(backend_url, run, events)
    assert detail["arrow_refused"] == "Arrow format is not supported for this project."
    assert detail["arrow_refused_at"].startswith(factory.at(2).isoformat()[:19])

    sign_in(page, backend_url, VIEWER, f"/runs/{run}")

    note = page.get_by_test_id("run-arrow-refused")
    expect(note).to_contain_text("BigQuery refused this run's Arrow rows")
    expect(note).to_contain_text("went as proto rows from then on")
    expect(note).to_contain_text("Arrow format is not supported for this project.")
