"""New columns mid-stream, as a user's own script brings them: a foreachBatch whose
micro-batch k brings a column the table lacks (or leaves a REQUIRED one NULL), with
``allowFieldAddition`` / ``allowFieldRelaxation``, in every exactly-once mode; the
slotted modes (buffered, committed) go on on streams taken before the change. Judged
in BigQuery: every key once, the new column's values from the batch that brought it,
NULL before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_tools.localbq.limits import limited
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

from tests.sink.test_streaming import SOURCE_SCHEMA, counted

pytestmark = pytest.mark.spark

ROWS, FILES = 40, 2
"""Two micro-batches of 20 rows (one file each)."""
NEW_FROM = 1
"""The micro-batch that first brings the new column."""
BASE = [
    bigquery.SchemaField("event_id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("amount", "FLOAT64"),
]


def run_query(
    spark: SparkSession,
    source: Path,
    checkpoint: Path,
    each_batch: Callable[[DataFrame, int], None],
) -> None:
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


def save(df: DataFrame, table: str, mode: str, **options: str) -> None:
    writer = df.write.format("onceover").mode("append").option("table", table)
    writer.option("mode", mode).options(**options).save()


def notes(rest: bigquery.Client, table: str) -> dict[int, str | None]:
    rows = rest.query_and_wait(f"SELECT event_id, note FROM `{table}`")
    return {int(r["event_id"]): r["note"] for r in rows}


@pytest.mark.parametrize("mode", ["pending", "buffered", "committed"])
def test_a_micro_batch_that_brings_a_new_column_widens_the_table_and_every_row_lands_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, mode: str
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=BASE))
    source = tmp_path / "orders"
    write_files(source, ROWS, FILES, "json")

    def each_batch(df: DataFrame, batch_id: int) -> None:
        rows = df.select("event_id", "amount").repartition(2, "event_id")
        if batch_id >= NEW_FROM:  # the source's new field, from this batch on
            rows = rows.selectExpr("*", "CONCAT('n', CAST(event_id AS STRING)) AS note")
        save(rows, table, mode, allowFieldAddition="true")

    run_query(spark, source, tmp_path / "ckpt", each_batch)
    assert counted(rest, table) == (ROWS, ROWS)
    by_key = notes(rest, table)
    per_batch = ROWS // FILES
    assert {k: v for k, v in by_key.items() if k < NEW_FROM * per_batch} == {
        k: None for k in range(NEW_FROM * per_batch)
    }
    assert {k: v for k, v in by_key.items() if k >= NEW_FROM * per_batch} == {
        k: f"n{k}" for k in range(NEW_FROM * per_batch, ROWS)
    }


def test_without_the_option_the_micro_batch_is_refused_before_a_row_naming_columns_and_option(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=[*BASE, REGION]))
    source = tmp_path / "orders"
    write_files(source, ROWS, FILES, "json")

    def each_batch(df: DataFrame, batch_id: int) -> None:
        rows = df.selectExpr("event_id", "amount", "COALESCE(currency, 'none') AS region")
        if batch_id >= NEW_FROM:  # two new columns; region left out
            rows = df.selectExpr("event_id", "amount", "'a' AS note", "customer_id AS buyer")
        save(rows, table, "committed")

    with pytest.raises(StreamingQueryException) as refused:
        run_query(spark, source, tmp_path / "ckpt", each_batch)
    message = str(refused.value)
    for named in ("'note'", "'buyer'", "allowFieldAddition", "'region'", "allowFieldRelaxation"):
        assert named in message
    assert counted(rest, table) == (ROWS // FILES, ROWS // FILES)  # batch 0 only
    assert [f.name for f in rest.get_table(table).schema] == ["event_id", "amount", "region"]


REGION = bigquery.SchemaField("region", "STRING", mode="REQUIRED")


@pytest.mark.parametrize("mode", ["buffered", "committed"])
def test_a_micro_batch_that_leaves_a_required_column_out_relaxes_it_and_every_row_lands_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, mode: str
) -> None:
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=[*BASE, REGION]))
    source = tmp_path / "orders"
    write_files(source, ROWS, FILES, "json")

    def each_batch(df: DataFrame, batch_id: int) -> None:
        rows = df.selectExpr("event_id", "amount", "'eu' AS region")  # non-null: REQUIRED fits
        if batch_id >= NEW_FROM:  # the source stopped sending region
            rows = df.selectExpr("event_id", "amount")
        save(rows.repartition(2, "event_id"), table, mode, allowFieldRelaxation="true")

    run_query(spark, source, tmp_path / "ckpt", each_batch)
    assert counted(rest, table) == (ROWS, ROWS)
    assert {f.name: f.mode for f in rest.get_table(table).schema}["region"] == "NULLABLE"
    rows = rest.query_and_wait(f"SELECT event_id, region FROM `{table}`")
    per_batch = ROWS // FILES
    assert {int(r["event_id"]): r["region"] for r in rows} == {
        k: "eu" if k < NEW_FROM * per_batch else None for k in range(ROWS)
    }


def test_a_query_restarted_with_a_new_column_goes_on_on_its_streams_and_carries_it(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """A writeStream query's schema is fixed while it runs (Spark plans it once); a
    new source column takes a restart, on the same checkpoint, with allowFieldAddition:
    the buffered slots' streams, taken with the old columns, go on with the new."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=BASE))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    per_batch = ROWS // FILES

    def run(columns: str) -> None:
        query = (
            spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
            .json(str(source)).selectExpr(*columns.split(";")).repartition(2, "event_id")
            .writeStream.format("onceover").option("table", table)
            .option("checkpointLocation", str(checkpoint))
            .option("allowFieldAddition", "true")
            .trigger(availableNow=True).start()
        )  # fmt: skip
        query.awaitTermination()

    write_files(source, per_batch, 1, "json")
    run("event_id;amount")
    write_files(source, per_batch, 1, "json", start=per_batch)
    run("event_id;amount;CONCAT('n', CAST(event_id AS STRING)) AS note")
    assert counted(rest, table) == (2 * per_batch, 2 * per_batch)
    assert notes(rest, table) == {
        k: None if k < per_batch else f"n{k}" for k in range(2 * per_batch)
    }


@pytest.mark.parametrize("mode", ["committed"])
def test_appends_refused_until_the_write_api_sees_the_new_column_are_sent_again_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, mode: str
) -> None:
    """On BigQuery the Storage Write API sees a new column minutes after tables.get does,
    refusing a writer schema with it until then ("Input schema has more fields than
    BigQuery schema"; the local BigQuery's schema_update_lag): the batch that brought the
    column waits, its rows go once, on the partitions' streams."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=BASE))
    source = tmp_path / "orders"
    write_files(source, ROWS, FILES, "json")

    def each_batch(df: DataFrame, batch_id: int) -> None:
        rows = df.select("event_id", "amount").repartition(2, "event_id")
        if batch_id >= NEW_FROM:
            rows = rows.selectExpr("*", "CONCAT('n', CAST(event_id AS STRING)) AS note")
        save(rows, table, mode, allowFieldAddition="true")

    with limited(schema_update_lag_s=3.0):
        run_query(spark, source, tmp_path / "ckpt", each_batch)
    assert counted(rest, table) == (ROWS, ROWS)
    per_batch = ROWS // FILES
    assert notes(rest, table) == {k: None if k < per_batch else f"n{k}" for k in range(ROWS)}
