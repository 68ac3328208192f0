"""df.writeStream.format("onceover") as a user's own script writes it, on the shared Spark
session: a file source, a checkpoint, availableNow; judged by what BigQuery holds."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_jobs.sink.driver import owner_of
from onceover_tools.chaos.runner import ORDER_SCHEMA
from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

SOURCE_SCHEMA = (
    "event_id BIGINT, order_id STRING, customer_id BIGINT, amount DOUBLE, currency STRING, "
    "event_time TIMESTAMP"
)


def counted(rest: bigquery.Client, table: str) -> tuple[int, int]:
    """``COUNT(*)`` and ``COUNT(DISTINCT event_id)``, asked of BigQuery."""
    query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`"
    row = next(iter(rest.query_and_wait(query)))
    return int(row["n"]), int(row["ids"])


def load(spark: SparkSession, source: Path, table: str, checkpoint: Path) -> None:
    """Everything new in ``source`` into ``table``, one file per micro-batch."""
    query = (
        spark.readStream.schema(SOURCE_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.format("onceover")
        .option("table", table)
        .option("key", "event_id")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def test_a_reset_checkpoint_is_refused_before_a_row_is_written(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 2_000, 2, "json")
    load(spark, source, table, checkpoint)
    assert counted(rest, table) == (2_000, 2_000)

    # Spark's progress deleted, the ledger (checkpoint/onceover) and the query id kept;
    # new files arrive. Batch ids 0 and 1 now name other data than the ledger's.
    for kept_by_spark in ("offsets", "commits", "sources"):
        shutil.rmtree(checkpoint / kept_by_spark)
    write_files(source, 1_000, 1, "json", start=2_000)

    with pytest.raises(StreamingQueryException, match="was reset") as refused:
        load(spark, source, table, checkpoint)
    assert "new checkpointLocation" in str(refused.value)
    assert counted(rest, table) == (2_000, 2_000)  # nothing written, nothing twice


def test_a_second_driver_on_a_checkpoint_is_refused_while_the_first_runs(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 1_000, 1, "json")
    load(spark, source, table, checkpoint)
    query_id = json.loads((checkpoint / "metadata").read_text())["id"]
    write_files(source, 1_000, 1, "json", start=1_000)

    # An orchestrator's retry while the first driver still runs: that one, on this host,
    # is recorded as the query's driver (a stand-in process plays it).
    first = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        owner = owner_of(first.pid)
        (checkpoint / "onceover" / query_id / "driver.json").write_text(
            json.dumps({"version": 1, "owner": owner})
        )
        with pytest.raises(StreamingQueryException, match="still runs") as refused:
            load(spark, source, table, checkpoint)
        assert f"pid {first.pid}" in str(refused.value)
        assert counted(rest, table) == (1_000, 1_000)  # nothing written
    finally:
        first.kill()
        first.wait()

    # A driver on another host cannot be looked into: its claim, renewed at its last
    # commit 10 s ago, holds for the lease (driver.lease_s, 120 s by default).
    claim = checkpoint / "onceover" / query_id / "driver.json"
    elsewhere = "other-host.example pid 4242 started 99"
    claim.write_text(json.dumps({"version": 1, "owner": elsewhere, "renewed_at": time.time() - 10}))
    with pytest.raises(StreamingQueryException, match="held by a driver on another host") as held:
        load(spark, source, table, checkpoint)
    assert elsewhere in str(held.value)
    assert counted(rest, table) == (1_000, 1_000)  # nothing written
    claim.write_text(
        json.dumps({"version": 1, "owner": elsewhere, "renewed_at": time.time() - 121})
    )
    load(spark, source, table, checkpoint)  # its lease lapsed: this one takes over
    assert counted(rest, table) == (2_000, 2_000)
