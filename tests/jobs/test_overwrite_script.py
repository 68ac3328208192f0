"""A user's nightly script that replaces the days it loads (``mode("overwrite")`` with
``partitionOverwriteMode=dynamic``), its driver SIGKILLed right after the swap's
transaction committed, then run again as an orchestrator retries it. Its ledger is in an
S3 bucket, as an EMR job keeps it. Counted in BigQuery: the new days hold exactly the new
rows, the other days their old ones, and the re-run swaps nothing a second time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_tools.localstores import LocalS3

from onceover.bigquery import BigQueryConfig
from onceover.processes import job_environment

pytestmark = pytest.mark.spark

NIGHTLY = """
import sys
from pyspark.sql import SparkSession
from onceover_jobs.sink.datasource import register

table, ledger = sys.argv[1:]
spark = SparkSession.builder.master("local[2]").getOrCreate()
register(spark)
# Tonight's load: 2,000 orders over two days, 2026-11-02 and 2026-11-03.
orders = spark.range(2000, numPartitions=4).selectExpr(
    "id AS order_id",
    "DATE_ADD(DATE '2026-11-02', CAST(id % 2 AS INT)) AS day",
    "CAST(id AS DOUBLE) AS amount",
)
(orders.write.format("onceover")
    .option("run_id", "nightly-2026-11-03")
    .option("ledger", ledger)
    .option("partitionOverwriteMode", "dynamic")
    .mode("overwrite")
    .save(table))
"""

SCHEMA = [
    bigquery.SchemaField("order_id", "INT64"),
    bigquery.SchemaField("day", "DATE"),
    bigquery.SchemaField("amount", "FLOAT64"),
]


def _by_day(rest: bigquery.Client, table: str) -> dict[str, tuple[int, int]]:
    rows = rest.query_and_wait(
        f"SELECT CAST(day AS STRING) AS day, COUNT(*) AS n, COUNT(DISTINCT order_id) AS k "
        f"FROM `{table}` GROUP BY day"
    )
    return {row["day"]: (row["n"], row["k"]) for row in rows}


def test_a_nightly_overwrite_killed_after_its_swap_is_rerun_without_a_second_swap(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    local_s3: LocalS3,
    s3_bucket: str,
) -> None:
    table = f"{dataset}.orders"
    created = bigquery.Table(table, schema=SCHEMA)
    created.time_partitioning = bigquery.TimePartitioning(field="day")
    rest.create_table(created)
    # Yesterday's rows: 300 on each of 2026-11-01, -02 and -03.
    old = ", ".join(f"({100_000 + n}, DATE '2026-11-0{1 + n % 3}', 1.0)" for n in range(900))
    rest.query_and_wait(f"INSERT INTO `{table}` VALUES {old}")
    assert _by_day(rest, table) == {f"2026-11-0{d}": (300, 300) for d in (1, 2, 3)}
    script = tmp_path / "nightly.py"
    script.write_text(NIGHTLY)
    env = {**job_environment(bq_config), **local_s3.environment()}
    env["ONCEOVER_FAILPOINTS"] = "overwrite.after_swap=crash@1"
    env["ONCEOVER_FAILPOINTS_STATE"] = str(tmp_path / "failpoints")  # counted across runs
    args = [sys.executable, str(script), table, f"{s3_bucket}/ledger"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, env=env, capture_output=True, text=True, timeout=300,
                              check=False)  # fmt: skip

    crashed = run()
    assert crashed.returncode != 0, crashed.stderr[-3000:]
    assert "failpoint overwrite.after_swap fired: crash" in crashed.stderr
    replaced = {"2026-11-01": (300, 300), "2026-11-02": (1000, 1000), "2026-11-03": (1000, 1000)}
    assert _by_day(rest, table) == replaced  # the swap committed, then the driver died

    # A row written between the two runs: a second swap of 2026-11-02 would take it away.
    rest.query_and_wait(f"INSERT INTO `{table}` VALUES (-1, DATE '2026-11-02', 0.0)")
    again = run()
    assert again.returncode == 0, again.stderr[-3000:]
    assert _by_day(rest, table) == {**replaced, "2026-11-02": (1001, 1001)}
    staging = [t.table_id for t in rest.list_tables(dataset) if t.table_id != "orders"]
    assert staging == []  # the staging table dropped by the run that finished
