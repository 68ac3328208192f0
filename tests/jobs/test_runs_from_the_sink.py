"""A user's own PySpark script, with nothing of ours but the monitor options, shows on the
control plane as runs: a batch write that succeeds ends ``succeeded``, one that fails
ends ``failed`` with the reason, and a streaming query is ``running`` with a heartbeat
per committed micro-batch, then ``failed`` when a micro-batch is aborted. One script,
one Spark driver, so all of them are one attempt each (the driver)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import bigquery
from onceover_backend.core.config import Settings
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment
from tests.backend.conftest import INGEST, TOKENS, VIEWER, bearer
from tests.backend.live import serving
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import count, create_refusing_table

pytestmark = pytest.mark.spark

SCRIPT = """
import sys

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession, functions as F

from onceover_jobs.sink.datasource import register

table, ledger, checkpoint, url, token = sys.argv[1:6]
spark = (
    SparkSession.builder.master("local[2]").appName("user-script")
    .config("spark.ui.enabled", "false").getOrCreate()
)
register(spark)
monitor = {"monitor.url": url, "monitor.token": token, "table": table, "key": "id"}

good = spark.range(0, 600, 1, 2).select("id", F.lit("ok").alias("name"))
(good.write.format("onceover").mode("append").options(**monitor)
    .option("ledger", ledger).option("run_id", "daily-ok").save())

bad = spark.range(600, 700, 1, 2).select("id", F.lit("much-too-long").alias("name"))
try:
    (bad.write.format("onceover").mode("append").options(**monitor)
        .option("ledger", ledger).option("run_id", "daily-bad").save())
except Exception:
    print("the failing write failed", flush=True)

# Micro-batches of 50 rows; BigQuery refuses every row of the third: the query fails.
query = (
    spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 50)
    .option("numPartitions", 1).load()
    .selectExpr("value + 1000 AS id",
                "IF(value >= 100, 'much-too-long', 'ok') AS name")
    .writeStream.format("onceover").options(**monitor)
    .option("checkpointLocation", checkpoint)
    .trigger(processingTime="0 seconds")
    .start()
)
try:
    query.awaitTermination(120)
except StreamingQueryException:
    print("the query failed", flush=True)
"""


def _ended(url: str, run_id: str) -> dict[str, Any] | None:
    """The run as the control plane shows it, once it has ended."""
    answer = httpx.get(f"{url}/api/runs/{run_id}", headers=bearer(VIEWER), timeout=10)
    body: dict[str, Any] = answer.json() if answer.status_code == 200 else {}
    return body if body.get("status") in ("succeeded", "failed") else None


def test_a_users_script_shows_as_runs_that_start_and_end(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = create_refusing_table(rest, f"{dataset}.names")
    database = f"sqlite:///{tmp_path / 'control-plane.db'}"
    upgrade_to_head(database)
    settings = Settings(database_url=database, tokens=TOKENS, frontend_dist=tmp_path / "none")
    script = tmp_path / "user_script.py"
    script.write_text(SCRIPT)
    with serving(create_app(settings, bigquery=bq_config)) as url:
        done = subprocess.run(
            [sys.executable, str(script), table, str(tmp_path / "ledger"),
             str(tmp_path / "ckpt"), url, INGEST],
            env=job_environment(bq_config), cwd=tmp_path, capture_output=True, text=True,
            timeout=300, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "the failing write failed" in done.stdout
        assert "the query failed" in done.stdout

        ok = wait_until("the good write's run", lambda: _ended(url, "daily-ok"), 30)
        bad = wait_until("the failing write's run", lambda: _ended(url, "daily-bad"), 30)
        runs = httpx.get(f"{url}/api/runs", headers=bearer(VIEWER), timeout=10).json()
        query_runs = [r for r in runs["data"] if r["run_id"] not in ("daily-ok", "daily-bad")]
        assert len(query_runs) == 1, query_runs
        streaming = wait_until("the query's run", lambda: _ended(url, query_runs[0]["run_id"]), 30)

    assert count(rest, table) == (600 + 100, 700)
    assert (ok["status"], ok["rows_committed"], ok["error"]) == ("succeeded", 600, None)
    assert [(a["started"], a["status"]) for a in ok["attempts"]] == [(True, "succeeded")]
    assert bad["status"] == "failed"
    assert "Spark aborted the write" in bad["error"]
    assert bad["rows_committed"] == 0
    (attempt,) = streaming["attempts"]
    assert attempt["attempt_id"] == ok["attempts"][0]["attempt_id"]  # one driver
    assert streaming["status"] == "failed"
    assert "micro-batch 2" in streaming["error"]
    assert attempt["last_heartbeat_at"] is not None
    assert streaming["rows_committed"] == 100  # micro-batches 0 and 1
