"""Reconciliation after a real job: the issue's must-show.

A stamped job loses an append's response and crashes right after its first commit;
the same command finishes it. The control plane reconciles the run by itself when it
succeeds, and ``POST /api/runs/{run_id}/reconcile`` answers ``ok`` with
``expected_rows`` = ``actual_rows`` = ``distinct_keys`` = N. Two rows of one key
inserted by hand make it ``mismatch``, listing that key with count 3 and its batch;
a row deleted by hand is a missing row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_jobs.generate import write_files

from onceover.bigquery import BigQueryConfig
from tests.backend.conftest import OPERATOR, TOKENS, VIEWER, bearer
from tests.backend.live import automatic_check, serving, wait_for_status
from tests.jobs.orders import load_orders

pytestmark = pytest.mark.spark

ROWS = 6_000
DEADLINE_S = 60.0


def _history(url: str, run_id: str) -> dict[str, Any]:
    response = httpx.get(
        f"{url}/api/runs/{run_id}/reconciliations", headers=bearer(VIEWER), timeout=10
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _reconcile(url: str, run_id: str) -> dict[str, Any]:
    response = httpx.post(
        f"{url}/api/runs/{run_id}/reconcile", headers=bearer(OPERATOR), timeout=120
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_run_with_faults_reconciles_ok_and_rows_changed_by_hand_are_named(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
) -> None:
    source = tmp_path / "orders"
    write_files(source, ROWS, 4, "json")
    table = f"{dataset}.orders"
    database = f"sqlite:///{tmp_path / 'onceover.db'}"
    upgrade_to_head(database)
    settings = Settings(database_url=database, tokens=TOKENS, frontend_dist=tmp_path / "none")

    with serving(create_app(settings, bigquery=bq_config)) as url:
        stamped = ["--stamp"]
        crashed = load_orders(bq_config, url, source, table, tmp_path,
                              "append.response=drop@3;commit.after=crash@1", stamped)  # fmt: skip
        assert crashed.returncode != 0
        assert "commit.after fired: crash" in (tmp_path / "failpoints" / "fired.log").read_text()
        again = load_orders(bq_config, url, source, table, tmp_path, extra=stamped)
        assert again.returncode == 0, again.stderr[-3000:]
        run_id = (tmp_path / "ckpt" / "onceover" / "run_id").read_text().strip()
        assert wait_for_status(url, VIEWER, run_id, "succeeded")["status"] == "succeeded"

        automatic = automatic_check(url, VIEWER, run_id, DEADLINE_S)
        clean = _reconcile(url, run_id)

        key = 4_321  # a key of the second batch
        rest.query(
            f"INSERT INTO `{table}` (event_id) VALUES (@key), (@key)",
            job_config=bigquery.QueryJobConfig(
                query_parameters=[bigquery.ScalarQueryParameter("key", "INT64", key)]
            ),
        ).result()
        duplicated = _reconcile(url, run_id)

        rest.query(f"DELETE FROM `{table}` WHERE event_id IN (@key, 17)",
                   job_config=bigquery.QueryJobConfig(query_parameters=[
                       bigquery.ScalarQueryParameter("key", "INT64", key)])).result()  # fmt: skip
        deleted = _reconcile(url, run_id)
        history = _history(url, run_id)

    assert automatic["status"] == "ok", automatic

    assert clean["status"] == "ok", clean
    assert clean["stamped"] is True
    assert (clean["expected_rows"], clean["actual_rows"], clean["distinct_keys"]) == (
        ROWS, ROWS, ROWS
    )  # fmt: skip
    assert (clean["missing_rows"], clean["extra_rows"], clean["duplicate_keys"]) == (0, 0, [])
    assert [b["status"] for b in clean["batches"]] == ["ok", "ok"]
    assert sum(b["actual_rows"] for b in clean["batches"]) == ROWS

    assert duplicated["status"] == "mismatch"
    (listed,) = duplicated["duplicate_keys"]
    assert (listed["key"], listed["count"]) == (str(key), 3)
    second_batch = clean["batches"][1]["batch_id"]
    assert listed["batch_id"] == second_batch
    assert duplicated["mismatched_batches"] == [second_batch]
    assert (duplicated["actual_rows"], duplicated["extra_rows"]) == (ROWS, 2)  # unstamped copies

    assert deleted["status"] == "mismatch"
    assert (deleted["actual_rows"], deleted["missing_rows"]) == (ROWS - 2, 2)
    assert deleted["duplicate_keys"] == []

    assert [c["status"] for c in history["data"]] == ["mismatch", "mismatch", "ok", "ok"]
