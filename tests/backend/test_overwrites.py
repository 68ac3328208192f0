"""A ``mode("overwrite")`` run as the control plane stores and shows it: the swap's events
kept, the run's detail saying what was replaced (rows, scope, partitions, the job) and the
step a run that did not finish stopped at, whatever order the events arrive in."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.tables import Event
from sqlalchemy import Engine
from sqlmodel import Session, select

from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer

DAYS = ["20261101", "20261102", "__NULL__"]


def _post(client: TestClient, events: list[Any]) -> None:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.status_code == 200, response.text


def _overwrite(client: TestClient, run: str) -> Any:
    response = client.get(f"/api/runs/{run}", headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    (batch,) = response.json()["batches"]
    return batch["overwrite"]


@pytest.mark.parametrize("stop", ["staging", "staged", "swap_asked", "swapped"])
def test_an_overwrite_run_shows_what_it_replaced_and_the_step_it_stopped_at(
    client: TestClient, engine: Engine, stop: str
) -> None:
    _post(client, f.overwrite_run("r1", stop, rows=100, partitions=DAYS))

    shown = _overwrite(client, "r1")
    assert shown["step"] == stop
    assert shown["staging_table"] == f.STAGING
    assert shown["rows_inserted"] == 100
    swap_heard = stop in ("swap_asked", "swapped")
    expected = {
        "job_id": "onceover_overwrite_r1_0" if swap_heard else None,
        "attempt": 0 if swap_heard else None,
        "rows_replaced": 40 if swap_heard else None,
        "partitions": DAYS if swap_heard else None,
        "partition_count": 3 if swap_heard else None,
        "scope": "the rows of the partitions (by day) the new rows fall in" if swap_heard else None,
    }
    assert {k: shown[k] for k in expected} == expected
    assert (shown["swap_started_at"] is not None) == swap_heard
    assert (shown["swapped_at"] is not None) == (stop == "swapped")
    with Session(engine) as session:
        kinds = sorted(e.type for e in session.exec(select(Event)) if "swap" in e.type)
    assert kinds == {
        "staging": [], "staged": [], "swap_asked": ["overwrite_swap_started"],
        "swapped": ["overwrite_swap_started", "overwrite_swapped"],
    }[stop]  # fmt: skip


def test_a_swap_is_shown_as_its_furthest_event_says_whatever_arrives_first(
    client: TestClient,
) -> None:
    """The driver's second job (attempt 1, after a failed one) swapped; its events and the
    first attempt's arrive backwards, and a repost changes nothing."""
    run = f.overwrite_run("r1", "staged")[:3]  # started, intent, committed
    swaps = [f.swap("r1", 5, done=True, attempt=1, replaced=7), f.swap("r1", 4, attempt=1),
             f.swap("r1", 3, attempt=0, replaced=7)]  # fmt: skip
    for event in swaps:
        _post(client, [*run, event])
        _post(client, [event])
    shown = _overwrite(client, "r1")
    assert (shown["step"], shown["job_id"], shown["attempt"]) == (
        "swapped", "onceover_overwrite_r1_1", 1
    )  # fmt: skip
    assert (shown["rows_replaced"], shown["partitions"], shown["scope"]) == (
        7, None, "every row of the table"
    )  # fmt: skip
    assert shown["swap_started_at"] == f.at(3).isoformat().replace("+00:00", "Z")


def test_an_append_shows_no_overwrite(client: TestClient) -> None:
    _post(client, f.full_run("r1"))
    assert _overwrite(client, "r1") is None
    receipt = client.get("/api/runs/r1/batches/0", headers=bearer(VIEWER)).json()
    assert receipt["receipts"][0]["overwrite"] is None
