"""What the dashboard reads beyond the plain resources: per-run retry counts and verdicts in
the runs list, per-table totals, who a token is, and page paths answered with the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.main import create_app
from onceover_backend.tables import Reconciliation, utcnow
from sqlalchemy import Engine
from sqlmodel import Session

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer

OTHER_TABLE = "p.ds.other"


def _post(client: TestClient, events: list[ev.Event]) -> None:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.is_success, response.text


def _get(client: TestClient, path: str, **params: Any) -> Any:
    response = client.get(path, params=params, headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    return response.json()


def _store_check(engine: Engine, run_id: str | None, table: str, status: str) -> None:
    # A stored reconciliation, as the reconciler writes one (its BigQuery side is
    # tested in test_reconciliation.py).
    with Session(engine) as session:
        session.add(
            Reconciliation(
                scope="run" if run_id else "table",
                run_id=run_id,
                table_id=table,
                status=status,
                trigger="api",
                actor="test",
                checked_at=utcnow(),
                duration_ms=1.0,
            )
        )
        session.commit()


def test_the_runs_list_counts_retry_codes_and_shows_the_latest_verdict(
    client: TestClient, engine: Engine
) -> None:
    s1 = "r1/s1"
    _post(client, f.full_run("r1"))  # one ALREADY_EXISTS
    _post(client, [f.out_of_range("r1", s1, 8, 7), f.out_of_range("r1", s1, 9, 9)])
    _post(client, f.full_run("r2"))
    _store_check(engine, "r1", f.TABLE, "mismatch")
    _store_check(engine, "r1", f.TABLE, "ok")

    runs = {r["run_id"]: r for r in _get(client, "/api/runs")["data"]}
    assert (runs["r1"]["already_exists"], runs["r1"]["out_of_range"]) == (1, 2)
    assert runs["r1"]["reconciliation"]["status"] == "ok"  # the newest of the two
    assert (runs["r2"]["already_exists"], runs["r2"]["out_of_range"]) == (1, 0)
    assert runs["r2"]["reconciliation"] is None

    detail = _get(client, "/api/runs/r1")
    assert (detail["already_exists"], detail["out_of_range"]) == (1, 2)
    assert detail["reconciliation"]["status"] == "ok"


def test_write_errors_steps_carry_the_rows_appended_ok(client: TestClient) -> None:
    _post(client, f.full_run("r1", rows=100))
    body = _get(client, "/api/metrics/write-errors", run_id="r1", until=f.at(600).isoformat())
    assert sum(step["rows_ok"] for step in body["series"]) == 100 == body["rows"]["OK"]


def test_tables_total_every_run_into_them(client: TestClient, engine: Engine) -> None:
    _post(client, f.full_run("r1", rows=100) + f.full_run("r2", rows=40))
    _post(client, [f.started("bad", "a1", 30), f.failed("bad", "a1", 31)])
    other = f.started("o1", "a1", 60).model_copy(update={"table": OTHER_TABLE})
    _post(client, [other])
    _store_check(engine, None, f.TABLE, "ok")

    body = _get(client, "/api/tables")
    assert body["count"] == 2
    assert [t["table"] for t in body["data"]] == [OTHER_TABLE, f.TABLE]  # newest load first
    table = body["data"][1]
    assert (table["runs"], table["rows_committed"], table["batches_committed"]) == (3, 140, 2)
    assert table["runs_by_status"] == {"succeeded": 2, "failed": 1}
    assert (table["already_exists"], table["out_of_range"]) == (2, 0)
    assert table["figures"]["reconciliation"]["status"] == "ok"
    assert body["data"][0]["figures"]["reconciliation"] is None

    only = _get(client, "/api/tables", table=OTHER_TABLE)
    assert (only["count"], [t["table"] for t in only["data"]]) == (1, [OTHER_TABLE])
    assert _get(client, "/api/tables", table="p.ds.none") == {"data": [], "count": 0}

    paged = _get(client, "/api/tables", limit=1, offset=1)
    assert [t["table"] for t in paged["data"]] == [f.TABLE]
    assert paged["count"] == 2


@pytest.mark.parametrize(
    ("token", "role", "may"),
    [
        (VIEWER, "viewer", ["viewer"]),
        (OPERATOR, "operator", ["operator", "viewer"]),
        (INGEST, "ingest", ["ingest"]),
    ],
)
def test_the_session_says_who_a_token_is(
    client: TestClient, token: str, role: str, may: list[str]
) -> None:
    response = client.get("/api/session", headers=bearer(token))
    assert response.status_code == 200, response.text
    assert response.json()["role"] == role
    assert response.json()["may"] == may


def test_the_session_refuses_a_missing_or_unknown_token(client: TestClient) -> None:
    assert client.get("/api/session").status_code == 401
    assert client.get("/api/session", headers=bearer("oo_nobody")).status_code == 401


def test_page_paths_answer_the_app_and_api_paths_stay_404(
    settings: Settings, tmp_path: Path
) -> None:
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<div id=root>the app</div>")
    (dist / "assets" / "app.js").write_text("console.log(1)")
    app = create_app(settings.model_copy(update={"frontend_dist": dist}))
    with TestClient(app) as client:
        for path in ("/", "/runs/load-1", "/alerts?tab=rules", "/tables/p.ds.t"):
            response = client.get(path)
            assert response.status_code == 200, path
            assert "the app" in response.text, path
        assert client.get("/assets/app.js").text == "console.log(1)"
        assert client.get("/assets/missing.js").status_code == 404
        missing_api = client.get("/api/nothing-here")
        assert missing_api.status_code == 404
        assert "the app" not in missing_api.text
