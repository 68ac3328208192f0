"""A real job posting to a real control plane: what the API shows equals what the
ledger recorded and what BigQuery holds, across a crash and a re-run.

The issue's must-show: after a run with ``append.response=drop@3`` and a crash at
``commit.after`` (of the second batch: the third append must come first), then the
same command again, ``GET /api/runs/{run_id}`` shows two
attempts, ``succeeded``, the committed batches and ``rows_committed`` = N; the
write-error metrics show ALREADY_EXISTS; a malformed batch is refused whole; a viewer
token cannot post.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_backend.tables import Event
from onceover_jobs.generate import write_files
from sqlalchemy import func
from sqlmodel import Session, select

from onceover.bigquery import BigQueryConfig
from tests.backend.conftest import INGEST, TOKENS, VIEWER, bearer
from tests.backend.live import serving, wait_for_status
from tests.jobs.orders import load_orders

pytestmark = pytest.mark.spark

ROWS = 20_000


def test_the_api_agrees_with_the_ledger_and_bigquery_after_a_crash_and_a_rerun(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    postgres_url: str,
    tmp_path: Path,
) -> None:
    source = tmp_path / "orders"
    write_files(source, ROWS, 4, "json")
    table = f"{dataset}.orders"
    upgrade_to_head(postgres_url)
    settings = Settings(database_url=postgres_url, tokens=TOKENS, frontend_dist=tmp_path / "none")
    app = create_app(settings, bigquery=bq_config)

    with serving(app) as url:
        crashed = load_orders(bq_config, url, source, table, tmp_path,
                        # The third append's response is lost (its retry meets ALREADY_EXISTS);
        # the driver dies right after committing the second batch.
                        "append.response=drop@3;commit.after=crash@2")  # fmt: skip
        assert crashed.returncode != 0
        fired = (tmp_path / "failpoints" / "fired.log").read_text()
        assert "append.response fired: drop" in fired
        assert "commit.after fired: crash" in fired

        again = load_orders(bq_config, url, source, table, tmp_path)
        assert again.returncode == 0, again.stderr[-3000:]

        run_id = (tmp_path / "ckpt" / "onceover" / "run_id").read_text().strip()
        run = wait_for_status(url, VIEWER, run_id, "succeeded")
        metrics = httpx.get(f"{url}/api/metrics/write-errors", params={"run_id": run_id},
                            headers=bearer(VIEWER), timeout=10).json()  # fmt: skip

        # A malformed batch is refused whole; a viewer cannot post.
        with Session(app.state.engine) as session:
            stored = session.exec(select(func.count()).select_from(Event)).one()
        good = {"id": "0" * 32, "time": "2026-11-22T00:00:00Z", "run_id": run_id,
                "table": table, "attempt_id": "x", "type": "run_heartbeat",
                "rows_committed": 0, "batches_committed": 0}  # fmt: skip
        malformed = httpx.post(f"{url}/api/events", json=[good, {**good, "rows_committed": -1}],
                               headers=bearer(INGEST), timeout=10)  # fmt: skip
        as_viewer = httpx.post(f"{url}/api/events", json=[good], headers=bearer(VIEWER), timeout=10)
        with Session(app.state.engine) as session:
            assert session.exec(select(func.count()).select_from(Event)).one() == stored

    assert malformed.status_code == 422
    assert malformed.json()["detail"][0]["loc"][:2] == ["body", 1]
    assert as_viewer.status_code == 403

    # The run: two attempts, succeeded, every row once.
    assert run["status"] == "succeeded", run
    assert len(run["attempts"]) == 2
    assert [a["status"] for a in run["attempts"]] == ["failed", "succeeded"]
    assert run["job"] == "orders"
    assert run["table"] == table
    assert run["rows_committed"] == ROWS
    assert metrics["totals"]["ALREADY_EXISTS"] >= 1
    assert metrics["totals"]["OUT_OF_RANGE"] == 0

    # BigQuery holds what the control plane says was committed.
    counted = next(iter(rest.query_and_wait(
        f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`")))  # fmt: skip
    assert (counted["n"], counted["ids"]) == (run["rows_committed"], ROWS)

    # The batches and their streams are the ledger's.
    ledger = [
        json.loads(path.read_text())
        for path in (tmp_path / "ckpt" / "onceover").rglob("batch-*.json")
    ]
    assert all(record["state"] == "committed" for record in ledger)

    def streams(batch: dict[str, Any]) -> list[tuple[str, int]]:
        return sorted((s["stream"], s["rows"]) for s in batch["streams"])

    committed = {b["batch_id"]: b for b in run["batches"] if b["state"] == "committed"}
    assert sorted(committed) == sorted(record["batch_id"] for record in ledger)
    for record in ledger:
        batch = committed[record["batch_id"]]
        assert batch["rows"] == record["expected_rows"]
        assert batch["resolved"] == record["resolved"]
        assert streams(batch) == streams(record)
    # The batch committed just before the crash was found committed and its replay skipped.
    assert [(b["resolved"], b["replays"]) for b in sorted(committed.values(),
            key=lambda b: b["batch_id"])] == [(False, 0), (True, 1)]  # fmt: skip
    committed_streams = {s["name"]: s for s in run["streams"] if s["state"] == "committed"}
    assert set(committed_streams) == {s for r in ledger for s, _ in streams(r)}
    assert sum(s["row_count"] for s in committed_streams.values()) == ROWS
    assert run["write_requests"]["ALREADY_EXISTS"] == metrics["totals"]["ALREADY_EXISTS"]
