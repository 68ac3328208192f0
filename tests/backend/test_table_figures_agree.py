"""A table's figures are one definition: the overview, the Tables list and the one table's
answer (``/api/tables?table=``) carry the same freshness, rows today, retry codes of the
24 hours, rows set aside and newest check of any scope (a run's check counts for its
table: the Tables page once said "never checked" beside the overview's "ok")."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from onceover_backend.tables import Reconciliation
from sqlalchemy import Engine
from sqlmodel import Session

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer

RUN_CHECKED = "p.ds.run_checked"  # only a run into it was checked
BOTH = "p.ds.both"  # a run's check, then the whole table's
NEVER = "p.ds.never"  # its only run failed before committing


def _now_ish(events: Sequence[ev.Event], table: str) -> list[ev.Event]:
    """``events`` into ``table``, moved to the last few seconds (today, this hour)."""
    by = datetime.now(UTC) - f.T0 - timedelta(seconds=10)
    return [e.model_copy(update={"table": table, "time": e.time + by}) for e in events]


def _check(engine: Engine, run_id: str | None, table: str, status: str) -> None:
    with Session(engine) as session:
        session.add(
            Reconciliation(
                scope="run" if run_id else "table", run_id=run_id, table_id=table,
                status=status, trigger="api", actor="test", checked_at=datetime.now(UTC),
                duration_ms=1.0,
            )
        )  # fmt: skip
        session.commit()


def _get(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params, headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    return response.json()


def test_the_overview_the_tables_list_and_a_tables_answer_carry_the_same_figures(
    client: TestClient, engine: Engine
) -> None:
    runs = [
        *_now_ish(f.full_run("r1", rows=100), RUN_CHECKED),
        *_now_ish([*f.full_run("r2", rows=40), f.out_of_range("r2", "r2/s1", 8, 7)], BOTH),
        *_now_ish([f.started("bad", "a1", 0), f.failed("bad", "a1", 1)], NEVER),
    ]
    response = client.post("/api/events", json=f.as_json(runs), headers=bearer(INGEST))
    assert response.is_success, response.text
    _check(engine, "r1", RUN_CHECKED, "ok")
    _check(engine, "r2", BOTH, "ok")
    _check(engine, None, BOTH, "mismatch")  # the newer: the table's latest check

    overview = {row["table"]: row for row in _get(client, "/api/overview")["tables"]}
    listed = {row["table"]: row["figures"] for row in _get(client, "/api/tables")["data"]}
    one_by_one = {
        table: _get(client, "/api/tables", table=table)["data"][0]["figures"] for table in overview
    }
    paged = {
        row["table"]: row["figures"]
        for offset in range(3)
        for row in _get(client, "/api/tables", limit=1, offset=offset)["data"]
    }
    assert sorted(overview) == sorted([RUN_CHECKED, BOTH, NEVER])
    assert listed == overview
    assert one_by_one == overview
    assert paged == overview

    # What they agree on is the story told above, not emptiness.
    said = {
        table: (
            row["freshness"],
            row["rows_committed_today"],
            row["already_exists"],
            row["out_of_range"],
            row["reconciliation"]
            and (row["reconciliation"]["scope"], row["reconciliation"]["status"]),
        )
        for table, row in overview.items()
    }
    assert said == {
        RUN_CHECKED: ("fresh", 100, 1, 0, ("run", "ok")),
        BOTH: ("fresh", 40, 1, 1, ("table", "mismatch")),
        NEVER: ("stale", 0, 0, 0, None),
    }
