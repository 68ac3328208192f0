"""df.write.format("onceover") in a real Spark session: options, schema checks, batch
writes that commit once per run id, and events, judged by the rows BigQuery holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.cloud import bigquery
from pyspark.sql import DataFrame, SparkSession

from onceover.bigquery import BigQueryConfig
from tests.helpers.receiver import TOKEN, Receiver
from tests.helpers.writeapi import count

pytestmark = pytest.mark.spark

SCHEMA = [
    bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("name", "STRING"),
]


def frame(spark: SparkSession, rows: int, partitions: int = 2) -> DataFrame:
    return spark.range(rows, numPartitions=partitions).selectExpr(
        "id", "concat('n', CAST(id AS STRING)) AS name"
    )


def make_table(rest: bigquery.Client, dataset: str, name: str = "t") -> str:
    table = f"{dataset}.{name}"
    rest.create_table(bigquery.Table(table, schema=SCHEMA))
    return table


def write(df: DataFrame, table: str, ledger: Path, **options: str) -> None:
    writer = df.write.format("onceover").mode("append").option("table", table)
    writer = writer.option("ledger", str(ledger))
    for name, value in options.items():
        writer = writer.option(
            name.replace("_", ".", 1) if name.startswith("monitor_") else name, value
        )
    writer.save()


@pytest.mark.parametrize("mode", ["pending", "committed", "default"])
def test_a_batch_write_lands_every_row_once(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path, mode: str
) -> None:
    table = make_table(rest, dataset)
    write(frame(spark, 5000, partitions=3), table, tmp_path, mode=mode, run_id="load-1")
    assert count(rest, table) == (5000, 5000)


def test_the_same_write_twice_commits_once_and_reports_the_duplicate(
    spark: SparkSession,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    receiver: Receiver,
) -> None:
    table = make_table(rest, dataset)
    monitor = {"monitor_url": receiver.url, "monitor_token": TOKEN}
    # One session: write_id names the write (a new driver would not need it:
    # tests/jobs/test_user_scripts.py), so the second is the first again.
    same = {"run_id": "nightly-1", "write_id": "orders", **monitor}
    write(frame(spark, 3000), table, tmp_path, **same)
    write(frame(spark, 3000), table, tmp_path, **same)
    assert count(rest, table) == (3000, 3000)
    committed = receiver.of_type("batch_committed")
    assert [(e["run_id"], e["rows"]) for e in committed] == [("nightly-1", 3000)]
    skipped = receiver.of_type("batch_skipped_duplicate")
    assert [e["run_id"] for e in skipped] == ["nightly-1"]
    # the second run's tasks saw the committed ledger and wrote nothing
    assert skipped[0]["rows"] == 0
    created = receiver.of_type("stream_created")
    assert len(created) == 2  # two partitions, first run only
    acknowledged = receiver.of_type("append_acknowledged")
    assert sum(e["rows"] for e in acknowledged) == 3000


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("mode", "sometimes", "onceover option 'mode': 'sometimes' is not one of pending"),
        ("row_format", "csv", "onceover option 'row_format'"),
        ("request.max_bytes", "20000000", "onceover option 'request.max_bytes': 20000000"),
        ("retry.deadline_s", "soon", "onceover option 'retry.deadline_s'"),
        ("driver.lease_s", "-1", "onceover option 'driver.lease_s': -1 is outside 0..86,400"),
        ("run_id", "a b", "onceover option 'run_id'"),
        ("monitor.url", "ftp://x", "onceover option 'monitor.url'"),
        ("key", "missing_column", "onceover option 'key': 'missing_column' is not a column"),
        ("tabel", "x", "onceover option 'tabel': unknown option"),
        ("stamp", "maybe", "onceover option 'stamp': 'maybe' is not true or false"),
    ],
)
def test_a_bad_option_fails_before_any_write_naming_it(
    spark: SparkSession,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    option: str,
    value: str,
    message: str,
) -> None:
    table = make_table(rest, dataset)
    writer = frame(spark, 10).write.format("onceover").mode("append")
    writer = writer.option("table", table).option("ledger", str(tmp_path)).option(option, value)
    with pytest.raises(Exception, match=re.escape(message)) as raised:
        writer.save()
    assert "SinkOptionError" in str(raised.value)
    assert count(rest, table) == (0, 0)


def test_a_missing_table_and_a_schema_mismatch_name_what_is_wrong(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    # A missing table is created unless the write says never to (createDisposition).
    with pytest.raises(Exception, match="does not exist") as missing:
        write(frame(spark, 10), f"{dataset}.absent", tmp_path, createDisposition="CREATE_NEVER")
    assert f"{dataset}.absent" in str(missing.value)
    assert "createDisposition is CREATE_NEVER" in str(missing.value)

    table = f"{dataset}.strict"
    rest.create_table(
        bigquery.Table(
            table,
            schema=[
                bigquery.SchemaField("id", "INT64", mode="REQUIRED"),
                bigquery.SchemaField("amount", "NUMERIC", mode="REQUIRED"),
                bigquery.SchemaField("name", "BOOL"),
            ],
        )
    )
    df = frame(spark, 10).selectExpr("id", "name", "id AS extra")
    with pytest.raises(Exception, match="does not fit") as mismatch:
        write(df, table, tmp_path)
    text = str(mismatch.value)
    assert "amount" in text  # REQUIRED and missing
    assert "extra" in text  # unknown to the table
    assert "name" in text  # string into BOOL
    assert count(rest, table) == (0, 0)


def test_complete_output_of_a_streaming_query_is_refused_naming_the_way_to_replace_rows(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Spark asks a stream writer to overwrite for complete output (the table replaced
    every trigger): refused before a row, naming foreachBatch with mode("overwrite")."""
    from onceover_jobs.sink.datasource import prepare_job
    from pyspark.sql.types import LongType, StructField, StructType

    for name, value in bq_config.env().items():
        monkeypatch.setenv(name, value)
    table = make_table(rest, dataset)
    options = {"table": table, "checkpointLocation": str(tmp_path / "checkpoint")}
    schema = StructType([StructField("id", LongType())])
    with pytest.raises(ValueError, match="onceover option 'outputMode'") as refused:
        prepare_job(options, schema, True, streaming=True)
    assert "foreachBatch with mode('overwrite')" in str(refused.value)
    assert count(rest, table) == (0, 0)


STAMP_SCHEMA = [
    *SCHEMA,
    bigquery.SchemaField("_onceover_run_id", "STRING"),
    bigquery.SchemaField("_onceover_batch_id", "INTEGER"),  # the REST API's legacy name
]


@pytest.mark.parametrize("row_format", ["arrow", "proto"])
def test_a_stamped_write_carries_its_run_id_on_every_row(
    spark: SparkSession,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    receiver: Receiver,
    row_format: str,
) -> None:
    table = f"{dataset}.stamped"
    rest.create_table(bigquery.Table(table, schema=STAMP_SCHEMA))
    monitor = {"monitor_url": receiver.url, "monitor_token": TOKEN}
    stamping = {"run_id": "nightly-7", "key": "id", "stamp": "true", "row_format": row_format}
    write(frame(spark, 3000, partitions=3), table, tmp_path, **stamping, **monitor)
    stamps = rest.query(
        f"SELECT _onceover_run_id, _onceover_batch_id, COUNT(*) AS n, COUNT(DISTINCT id) AS d "
        f"FROM `{table}` GROUP BY 1, 2"
    ).result()
    # A batch write has no micro-batch id: NULL.
    assert [tuple(row.values()) for row in stamps] == [("nightly-7", None, 3000, 3000)]
    committed = receiver.of_type("batch_committed")
    assert [(e["stamped"], e["key"]) for e in committed] == [(True, "id")]


def test_stamping_names_what_the_table_or_the_dataframe_gets_wrong(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    plain = make_table(rest, dataset)
    with pytest.raises(Exception, match="onceover option 'stamp'") as unstampable:
        write(frame(spark, 10), plain, tmp_path, stamp="true")
    text = str(unstampable.value)
    assert "lacks _onceover_run_id STRING and _onceover_batch_id INT64" in text
    assert f"ALTER TABLE `{plain}` ADD COLUMN _onceover_run_id STRING" in text

    table = f"{dataset}.stamped"
    rest.create_table(bigquery.Table(table, schema=STAMP_SCHEMA))
    clashing = frame(spark, 10).selectExpr("id", "name", "'mine' AS _ONCEOVER_RUN_ID")
    with pytest.raises(Exception, match="onceover option 'stamp'") as clash:
        write(clashing, table, tmp_path, stamp="true")
    assert "the DataFrame has column '_ONCEOVER_RUN_ID'" in str(clash.value)
    assert count(rest, plain) == (0, 0)
    assert count(rest, table) == (0, 0)
