"""Which write is which, as a user's own script writes them on the shared Spark session:
foreachBatch replayed after its writes committed, several writes under one run id, a
re-run (a batch write without run_id: tests/sink/test_connector_writes.py). Judged by
counting rows and keys in BigQuery."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_tools.chaos.runner import ORDER_SCHEMA
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.waiting import wait_until
from tests.sink.test_streaming import SOURCE_SCHEMA, counted

pytestmark = pytest.mark.spark

SUMMARY_SCHEMA = [
    bigquery.SchemaField("batch_id", "INT64"),
    bigquery.SchemaField("orders", "INT64"),
]


def tables(rest: bigquery.Client, dataset: str) -> tuple[str, str]:
    detail, summary = f"{dataset}.orders", f"{dataset}.summary"
    rest.create_table(bigquery.Table(detail, schema=ORDER_SCHEMA))
    rest.create_table(bigquery.Table(summary, schema=SUMMARY_SCHEMA))
    return detail, summary


def summary_rows(rest: bigquery.Client, table: str) -> list[tuple[int, int]]:
    query = f"SELECT batch_id, orders FROM `{table}` ORDER BY batch_id, orders"
    return [(int(r["batch_id"]), int(r["orders"])) for r in rest.query_and_wait(query)]


def save(df: DataFrame, table: str, **options: str) -> None:
    writer = df.write.format("onceover").mode("append").option("table", table)
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def test_a_foreach_batch_replayed_after_its_writes_committed_writes_each_row_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    detail, summary = tables(rest, dataset)
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 3_000, 3, "json")
    failed_once = tmp_path / "failed-once"

    def each_batch(df: DataFrame, batch_id: int) -> None:
        # Three writes per call, no option but the table: two into one table (the
        # call's writes 0 and 1 into it), one into another.
        save(df.where("event_id % 2 = 0"), detail)
        save(df.where("event_id % 2 = 1"), detail)
        save(df.selectExpr(f"CAST({batch_id} AS BIGINT) AS batch_id", "1 AS one")
             .groupBy("batch_id").agg({"one": "count"}).withColumnRenamed("count(one)", "orders"),
             summary)  # fmt: skip
        if batch_id == 1 and not failed_once.exists():
            failed_once.touch()  # the next step of the function fails, after the writes
            raise RuntimeError("the step after the writes failed")

    def run() -> None:
        query = (
            spark.readStream.schema(SOURCE_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .writeStream.foreachBatch(each_batch)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    with pytest.raises(StreamingQueryException, match="the step after the writes failed"):
        run()
    assert counted(rest, detail) == (2_000, 2_000)  # batches 0 and 1 committed
    run()  # Spark replays batch 1, then runs batch 2
    assert counted(rest, detail) == (3_000, 3_000)
    assert summary_rows(rest, summary) == [(0, 1_000), (1, 1_000), (2, 1_000)]


def test_one_run_id_writes_two_tables_and_one_table_twice(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, receiver: Receiver
) -> None:
    detail, summary = tables(rest, dataset)
    source = tmp_path / "orders"
    write_files(source, 2_000, 2, "json")
    ledger = str(tmp_path / "ledger")
    monitor = {"monitor.url": receiver.url, "monitor.token": TOKEN}

    def daily_job(session: SparkSession) -> None:
        orders = session.read.schema(SOURCE_SCHEMA).json(str(source))
        for currency_half in ("event_id < 1000", "event_id >= 1000"):  # one table, twice
            save(orders.where(currency_half), detail, run_id="day-1", ledger=ledger, **monitor)
        totals = orders.selectExpr("CAST(0 AS BIGINT) AS batch_id", "event_id")
        save(
            totals.groupBy("batch_id").agg({"event_id": "count"})
            .withColumnRenamed("count(event_id)", "orders"),
            summary, run_id="day-1", ledger=ledger, **monitor,
        )  # fmt: skip

    daily_job(spark)
    assert counted(rest, detail) == (2_000, 2_000)
    assert summary_rows(rest, summary) == [(0, 2_000)]

    # (A re-run, in a new driver, writes nothing again: tests/jobs/test_user_scripts.py.)
    # A write_id names a write whatever the session: the same one again is a no-op.
    extra = spark.read.schema(SOURCE_SCHEMA).json(str(source)).where("event_id < 10")
    for _ in range(2):
        save(extra, detail, run_id="day-1", ledger=ledger, write_id="late-fix")
    assert counted(rest, detail) == (2_010, 2_000)

    # Each write is reported as itself, so the control plane keeps one batch per write.
    def commits() -> set[tuple[str, str, int]] | None:
        seen = {(e["table"], e["write"], e["rows"]) for e in receiver.of_type("batch_committed")}
        return seen if len(seen) == 3 else None

    assert wait_until("the three writes' commits", commits, 30) == {
        (detail, "0", 1_000),
        (detail, "1", 1_000),
        (summary, "0", 1),
    }
