"""The spark-bigquery-connector README's write examples (0.45, "Writing data to
BigQuery") as a user's own script writes them, with only ``format("bigquery")`` changed
to ``format("onceover")``, on the shared Spark session. Judged by what BigQuery holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import bigquery
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - as PySpark's own docs import it

from tests.sink.test_streaming import counted

pytestmark = pytest.mark.spark

ROWS = 600


def orders(spark: SparkSession) -> DataFrame:
    return spark.range(ROWS, numPartitions=3).selectExpr(
        "id AS event_id",
        "CAST(DATE '2026-11-01' + CAST(id % 30 AS INT) AS DATE) AS day",
        "IF(id % 2 = 0, 'EUR', 'USD') AS currency",
        "CAST(id AS DOUBLE) / 10 AS amount",
    )


def test_the_readmes_direct_write_into_a_table_the_write_creates(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """``.option("writeMethod", "direct").save("dataset.table")``, the table missing:
    created from the DataFrame (partitioned and clustered as the options say), every row
    once; the same save() again is another run and writes again (no run_id), once."""
    table = f"{dataset}.orders"
    df = orders(spark)
    (
        df.write.format("onceover")
        .option("writeMethod", "direct")
        .option("partitionField", "day")
        .option("clusteredFields", "currency")
        .mode("append")
        .save(table)
    )
    assert counted(rest, table) == (ROWS, ROWS)
    created = rest.get_table(table)
    assert created.time_partitioning is not None
    assert created.time_partitioning.field == "day"
    assert created.clustering_fields == ["currency"]

    df.write.format("onceover").option("writeMethod", "direct").mode("append").save(table)
    assert counted(rest, table) == (2 * ROWS, ROWS)  # a re-run without run_id: again


def test_a_save_without_run_id_whose_task_failed_and_was_retried_writes_each_row_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """The connector commits such a save atomically; so does the sink: the id made for
    this save() keeps its tasks' retries exact (local[2,4] retries a failed task)."""
    table = f"{dataset}.orders"
    last = ROWS - 1

    @F.udf("long", useArrow=False)  # no pandas here: a plain Python UDF
    def fails_once_late(event_id: int) -> int:
        from pyspark import TaskContext

        task = TaskContext.get()
        if task is not None and task.attemptNumber() == 0 and event_id == last:
            raise RuntimeError("injected: the task's last row, first attempt")
        return event_id

    df = orders(spark).withColumn("event_id", fails_once_late("event_id"))
    # Small Arrow batches: the task hands the sink some before its last row fails.
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch") or "10000"
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        df.write.format("onceover").mode("append").save(table)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)
    assert counted(rest, table) == (ROWS, ROWS)


def test_the_readmes_indirect_write_is_written_directly_each_row_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """``.option("temporaryGcsBucket", ...).save("dataset.table")``, the connector's
    indirect method (its default): the bucket is ignored with a note, and the rows go
    through the Storage Write API, each once."""
    table = f"{dataset}.orders"
    (
        orders(spark)
        .write.format("onceover")
        .option("temporaryGcsBucket", "some-bucket")
        .mode("append")
        .save(table)
    )
    assert counted(rest, table) == (ROWS, ROWS)


def test_the_readmes_at_least_once_write_and_an_indirect_bucket_set_for_it(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """``writeAtLeastOnce=true`` (the ``_default`` stream) with ``temporaryGcsBucket``
    left in from the connector's indirect method: the bucket is ignored, every row lands."""
    table = f"{dataset}.orders"
    (
        orders(spark)
        .write.format("onceover")
        .option("writeAtLeastOnce", "true")
        .option("temporaryGcsBucket", "some-bucket")
        .option("table", table)
        .mode("append")
        .save()
    )
    rows, keys = counted(rest, table)
    assert keys == ROWS
    assert rows >= ROWS  # at least once: a retry may repeat rows, none is missing


def test_the_readmes_streaming_write_into_a_table_the_query_creates(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """``writeStream`` as the README writes it (its bucket for the indirect method left
    in, ignored): the missing table created, every row once; the query started again on
    its checkpoint writes nothing again."""
    table = f"{dataset}.orders"
    source = tmp_path / "orders"
    orders(spark).write.parquet(str(source))
    df = spark.readStream.schema(orders(spark).schema).parquet(str(source))
    for _ in range(2):
        (
            df.writeStream.format("onceover")
            .option("temporaryGcsBucket", "some-bucket")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .option("table", table)
            .trigger(availableNow=True)  # the test's: to stop when the files are read
            .start()
            .awaitTermination()
        )
        assert counted(rest, table) == (ROWS, ROWS)


def test_the_connectors_indirect_write_is_refused_naming_the_option(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    table = f"{dataset}.orders"
    writer = orders(spark).write.format("onceover").option("writeMethod", "indirect")
    with pytest.raises(Exception, match="onceover option 'writeMethod'") as refused:
        writer.mode("append").save(table)
    assert "Storage Write API" in str(refused.value)
    assert [t.table_id for t in rest.list_tables(dataset)] == []  # not even created


def test_the_readmes_cdc_write_applies_changes_by_the_primary_key(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """The README's change data capture write (``_CHANGE_TYPE``, ``writeAtLeastOnce``,
    ``writeMethod=direct``) into a table with a primary key: upserts and deletes applied
    by key; written again (a re-run without run_id), the table is the same."""
    from tests.sink.test_cdc_writes import keyed_table, state

    table = f"{dataset}.salaries"
    keyed_table(rest, table)
    changes = spark.createDataFrame(
        [(100, None, None, "DELETE"), (101, "Tal", 8000, "UPSERT"), (105, "Izumi", 6000, "UPSERT")],
        "ID long, Name string, Salary long, _CHANGE_TYPE string",
    )
    for _ in range(2):
        (
            changes.write.format("onceover")
            .option("writeMethod", "direct")
            .option("writeAtLeastOnce", "true")
            .mode("append")
            .save(table)
        )
        assert state(rest, table) == {101: ("Tal", 8000), 105: ("Izumi", 6000)}
