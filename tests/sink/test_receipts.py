"""A batch's receipt, as a user's own stamped writes leave it: the source offsets Spark
logged for the micro-batch, BigQuery's commit time, and a key checksum that one aggregate
query over the table's stamped rows reproduces, in the ledger and in ``batch_committed``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_tools.chaos.runner import ORDER_SCHEMA
from pyspark.sql import SparkSession
from pyspark.sql import functions as fn

from onceover.key_checksum import (
    BucketTally,
    key_bucket_sql,
    key_checksum,
    key_checksum_sql,
    key_sum_sql,
)
from onceover.ledger_files import scope_records
from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.waiting import wait_until
from tests.sink.test_streaming import SOURCE_SCHEMA

pytestmark = pytest.mark.spark

STAMP = [
    bigquery.SchemaField("_onceover_run_id", "STRING"),
    bigquery.SchemaField("_onceover_batch_id", "INT64"),
]


def checksum_in_bigquery(rest: bigquery.Client, table: str, key: str, where: str) -> int:
    query = f"SELECT {key_checksum_sql(key)} AS c FROM `{table}` WHERE {where}"
    return int(next(iter(rest.query_and_wait(query)))["c"])


def tally_in_bigquery(rest: bigquery.Client, table: str, key: str, where: str) -> list[Any]:
    """The key tally of the rows ``where`` selects, as receipts carry it (INT64 keys)."""
    query = (
        f"SELECT {key_bucket_sql(key)} AS b, COUNT(*) AS n, {key_checksum_sql(key)} AS c, "
        f"{key_sum_sql(key)} AS s FROM `{table}` WHERE {where} GROUP BY b ORDER BY b"
    )
    return [[r["b"], r["n"], r["c"], str(int(r["s"]))] for r in rest.query_and_wait(query)]


def test_each_micro_batch_has_its_offsets_commit_time_and_a_checksum_bigquery_agrees_with(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, receiver: Receiver
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA + STAMP))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 900, 3, "json")
    query = (
        spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
        .json(str(source)).writeStream.format("onceover")
        .option("table", table).option("key", "event_id").option("stamp", "true")
        .option("monitor.url", receiver.url).option("monitor.token", TOKEN)
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination()

    def three() -> list[dict[str, Any]] | None:
        seen = receiver.of_type("batch_committed")
        return seen if len(seen) == 3 else None

    committed = wait_until("three batch_committed", three, 30)
    by_batch = {e["batch_id"]: e for e in committed}
    assert sorted(by_batch) == [0, 1, 2]
    ledger = {r.batch_id: r for r in scope_records(checkpoint / "onceover", query.id)}
    for batch, event in by_batch.items():
        in_place = checksum_in_bigquery(rest, table, "event_id", f"_onceover_batch_id = {batch}")
        assert event["key_checksum"] == in_place == ledger[batch].key_checksum
        assert in_place != 0
        # The key tally (INT64 key: with key sums) is the grouped query's answer.
        buckets = tally_in_bigquery(rest, table, "event_id", f"_onceover_batch_id = {batch}")
        assert event["key_buckets"] == buckets
        assert [list(b) for b in ledger[batch].key_buckets or ()] == buckets
        # The offsets Spark logged for the batch: one file source, its log offset.
        entry = (checkpoint / "offsets" / str(batch)).read_text().splitlines()[2:]
        assert event["source_offsets"] == entry == list(ledger[batch].offsets or ())
        assert json.loads(entry[0]) == {"logOffset": batch}
        # Buffered (writeStream's default): BigQuery gives no flush time; the driver's.
        assert event["mode"] == "buffered"
        assert event["commit_time"] is not None
        assert datetime.fromisoformat(event["commit_time"]) == datetime.fromisoformat(
            ledger[batch].committed_at or ""
        )


def test_rows_set_aside_are_not_in_the_checksum_of_a_batch_write(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, receiver: Receiver
) -> None:
    table = f"{dataset}.names"
    schema = [
        bigquery.SchemaField("order_id", "STRING", mode="REQUIRED"),
        bigquery.SchemaField("name", "STRING", max_length=5),
    ]
    rest.create_table(bigquery.Table(table, schema=schema + STAMP))
    orders = spark.range(0, 300, 1, 2).select(
        fn.concat(fn.lit("o-"), fn.col("id").cast("string")).alias("order_id"),
        fn.when(fn.col("id") % 50 == 7, fn.lit("much-too-long"))
        .otherwise(fn.lit("ok"))
        .alias("name"),
    )
    (
        orders.write.format("onceover").mode("append")
        .option("table", table).option("key", "order_id").option("stamp", "true")
        .option("run_id", "names-1").option("ledger", str(tmp_path / "ledger"))
        .option("dead_letter", f"{dataset}.names_refused")
        .option("monitor.url", receiver.url).option("monitor.token", TOKEN).save()
    )  # fmt: skip

    (event,) = wait_until("batch_committed", lambda: receiver.of_type("batch_committed"), 30)
    kept = [f"o-{i}" for i in range(300) if i % 50 != 7]
    in_place = checksum_in_bigquery(rest, table, "order_id", "_onceover_run_id = 'names-1'")
    assert event["key_checksum"] == in_place == key_checksum(kept)
    tally = BucketTally(integer=False)  # STRING keys: no key sums; set-aside rows left out
    for k in kept:
        tally.add(k)
    assert event["key_buckets"] == [list(b) for b in tally.receipt() or ()]
    assert event["dead_lettered_rows"] == 6
    assert event["source_offsets"] is None  # a batch write reads no stream source
    # Pending: BigQuery's own commit time, as BatchCommitWriteStreams answered it.
    (record,) = scope_records(tmp_path / "ledger", "names-1")
    assert record.commit_time is not None
    assert datetime.fromisoformat(event["commit_time"]) == datetime.fromisoformat(
        record.commit_time
    )
