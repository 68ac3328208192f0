"""``missingValue``: what a table's column the DataFrame lacks gets, as a user's script
writes it, judged by what BigQuery holds (the local BigQuery fills defaults through the
launcher patch ``column_defaults``)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import types
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.options import parse_options
from onceover_jobs.sink.rows.missing_values import defaults_left_out, with_defaults
from onceover_jobs.sink.wire.requests import ArrowEncoder, raw_request
from pyspark.sql import SparkSession

from tests.sink.test_streaming import counted

ROWS = 40


def regions_table(rest: bigquery.Client, dataset: str) -> str:
    """``event_id``, ``amount``, and two columns with a DEFAULT: ``region`` REQUIRED
    ('EU'), ``channel`` nullable ('web')."""
    table_id = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table_id, schema=[
        bigquery.SchemaField("event_id", "INT64"),
        bigquery.SchemaField("amount", "FLOAT64"),
        bigquery.SchemaField("region", "STRING", mode="REQUIRED", default_value_expression="'EU'"),
        bigquery.SchemaField("channel", "STRING", default_value_expression="'web'"),
    ]))  # fmt: skip
    return table_id


@pytest.mark.spark
@pytest.mark.parametrize("row_format", ["arrow", "proto"])
def test_missing_value_default_fills_the_columns_the_dataframe_lacks(
    spark: SparkSession, rest: bigquery.Client, dataset: str, row_format: str
) -> None:
    table = regions_table(rest, dataset)
    df = spark.range(ROWS, numPartitions=2).selectExpr("id AS event_id", "id / 2 AS amount")
    (
        df.write.format("onceover")
        .option("missingValue", "default")
        .option("row_format", row_format)
        .option("run_id", f"defaults-{row_format}")
        .mode("append")
        .save(table)
    )
    assert counted(rest, table) == (ROWS, ROWS)
    (row,) = rest.query_and_wait(
        f"SELECT COUNTIF(region = 'EU') AS eu, COUNTIF(channel = 'web') AS web FROM `{table}`"
    )
    assert (row["eu"], row["web"]) == (ROWS, ROWS)


@pytest.mark.spark
def test_without_it_the_columns_are_null_and_the_driver_says_why(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """The default, ``null``, as BigQuery does without the setting: a REQUIRED column with
    a DEFAULT the DataFrame lacks is refused before a row is sent; a nullable one is NULL
    (the driver's log names it and the option: tests/sink/test_options.py)."""
    table = regions_table(rest, dataset)
    df = spark.range(ROWS, numPartitions=2).selectExpr("id AS event_id", "id / 2 AS amount")
    with pytest.raises(Exception, match="'region' is REQUIRED in the table"):
        df.write.format("onceover").option("run_id", "nulls-0").mode("append").save(table)
    assert counted(rest, table) == (0, 0)

    (
        df.selectExpr("*", "'NA' AS region")
        .write.format("onceover")
        .option("run_id", "nulls-1")
        .mode("append")
        .save(table)
    )
    (row,) = rest.query_and_wait(
        f"SELECT COUNTIF(region = 'NA') AS na, COUNTIF(channel IS NULL) AS nulls FROM `{table}`"
    )
    assert (row["na"], row["nulls"]) == (ROWS, ROWS)


def test_a_bad_missing_value_is_refused_naming_the_option() -> None:
    options = {"table": "p-1234.d.t", "missingvalue": "zero"}  # as Spark hands them
    with pytest.raises(SinkOptionError, match=r"'missingValue'.*'zero' is not null"):
        parse_options(options, default_project=None, streaming=False)
    options["missingvalue"] = "DEFAULT"
    parsed = parse_options(options, default_project=None, streaming=False)
    assert parsed.missing_value == "default"


def test_the_first_request_of_a_connection_asks_for_the_defaults() -> None:
    """Sticky on the connection: it rides with the writer schema, which every connection's
    first request carries (a reconnect's too); ``null`` asks for nothing."""
    schema = pa.schema([("event_id", pa.int64())])
    asking, plain = types.AppendRowsRequest(), types.AppendRowsRequest()
    with_defaults(ArrowEncoder(schema), "default").schema_payload(asking)
    with_defaults(ArrowEncoder(schema), "null").schema_payload(plain)
    interpretation = types.AppendRowsRequest.MissingValueInterpretation
    assert raw_request(asking).default_missing_value_interpretation == interpretation.DEFAULT_VALUE
    assert raw_request(asking).arrow_rows.writer_schema.serialized_schema
    assert raw_request(plain).default_missing_value_interpretation == 0  # unset: NULL


def test_the_driver_names_the_defaults_a_write_leaves_null() -> None:
    fields = [
        bigquery.SchemaField("event_id", "INT64"),
        bigquery.SchemaField("Region", "STRING", default_value_expression="'EU'"),
        bigquery.SchemaField("channel", "STRING", default_value_expression="'web'"),
    ]
    given = pa.schema([("event_id", pa.int64()), ("region", pa.string())])
    assert defaults_left_out(given, fields) == ["channel"]  # names are case-insensitive
