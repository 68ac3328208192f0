"""``dead_letter`` in a user's streaming query, on the shared Spark session: the sink as
``writeStream``'s format (buffered mode, its default) and inside ``foreachBatch``
(pending mode), each over three micro-batches with a few names too long for the table's
``STRING(5)``. Counted in BigQuery, in the table and in the dead-letter table."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from pyspark.sql import DataFrame, SparkSession

from tests.helpers.writeapi import count_distinct, create_refusing_table
from tests.sink.test_streaming import SOURCE_SCHEMA

pytestmark = pytest.mark.spark

ROWS = 3_000
BAD = [i for i in range(ROWS) if i % 250 == 7]  # 12 rows, in every micro-batch
NAMES = (
    "event_id",
    "CASE WHEN event_id % 250 = 7 THEN 'much-too-long' ELSE currency END AS name",
)


def names_table(rest: bigquery.Client, dataset: str, name: str) -> str:
    return create_refusing_table(rest, f"{dataset}.{name}", key="event_id")


def set_aside(rest: bigquery.Client, dead_letter: str, table: str) -> list[tuple[int, int]]:
    """(key, batch) of the rows set aside for ``table``."""
    found = rest.query_and_wait(
        f"SELECT CAST(`key` AS INT64) AS k, batch_id FROM `{dead_letter}` "
        f"WHERE `table` = '{table}' ORDER BY k"
    )
    return [(int(r["k"]), int(r["batch_id"])) for r in found]


def test_bad_rows_of_every_micro_batch_are_set_aside_once_by_write_stream_and_foreach_batch(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    source = tmp_path / "orders"
    write_files(source, ROWS, 3, "json")  # one file per micro-batch
    streamed = names_table(rest, dataset, "streamed")
    per_batch = names_table(rest, dataset, "per_batch")
    dead_letter = f"{dataset}.refused"

    def events() -> DataFrame:
        return (
            spark.readStream.schema(SOURCE_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .selectExpr(*NAMES)
        )

    (
        events()
        .writeStream.format("onceover")
        .option("table", streamed)
        .option("key", "event_id")
        .option("dead_letter", dead_letter)
        .option("checkpointLocation", str(tmp_path / "streamed"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )

    def each_batch(df: DataFrame, batch_id: int) -> None:
        (
            df.write.format("onceover")
            .mode("append")
            .option("table", per_batch)
            .option("key", "event_id")
            .option("dead_letter", dead_letter)
            .save()
        )

    (
        events()
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "per_batch"))
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )

    good = ROWS - len(BAD)
    for table in (streamed, per_batch):
        assert count_distinct(rest, table, "event_id") == (good, good)
        aside = set_aside(rest, dead_letter, table)
        assert [key for key, _ in aside] == BAD
        assert {batch for _, batch in aside} == {0, 1, 2}  # each micro-batch set its own aside
