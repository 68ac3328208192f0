"""``allowFieldAddition`` / ``allowFieldRelaxation``: the table's schema widened before the
write, as BigQuery allows a schema to change; the rows judged in BigQuery."""

from __future__ import annotations

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.table.widening import Widening, widened, widening_advice, widening_option
from pyspark.sql import SparkSession

from onceover.bigquery import BigQueryConfig
from tests.sink.test_streaming import counted

TABLE = [
    bigquery.SchemaField("event_id", "INT64", mode="REQUIRED"),
    bigquery.SchemaField("region", "STRING", mode="REQUIRED"),
    bigquery.SchemaField(
        "address", "RECORD", fields=[bigquery.SchemaField("city", "STRING", mode="REQUIRED")]
    ),
]
SOURCE = pa.schema([
    pa.field("event_id", pa.int64(), nullable=False),
    pa.field("address", pa.struct([("city", pa.string()), ("zip", pa.string())])),
    pa.field("amount", pa.float64(), nullable=False),  # non-nullable: added NULLABLE
    pa.field("tags", pa.list_(pa.string())),
])  # fmt: skip


def test_addition_adds_the_missing_columns_nullable_at_the_top_and_inside_records() -> None:
    changes = widened(TABLE, SOURCE, Widening(add=True))
    assert changes.added == ["address.zip", "amount", "tags"]
    assert changes.relaxed == []
    by_name = {f.name: f for f in changes.fields}
    assert [f.name for f in changes.fields] == ["event_id", "region", "address", "amount", "tags"]
    assert by_name["amount"].mode == "NULLABLE"  # BigQuery adds no REQUIRED column
    assert by_name["tags"].mode == "REPEATED"
    assert [(m.name, m.mode) for m in by_name["address"].fields] == [
        ("city", "REQUIRED"), ("zip", "NULLABLE")
    ]  # fmt: skip
    assert by_name["region"].mode == "REQUIRED"  # not relaxed without the option


def test_relaxation_makes_required_columns_the_dataframe_may_leave_null_nullable() -> None:
    changes = widened(TABLE, SOURCE, Widening(relax=True))
    assert changes.relaxed == ["region", "address.city"]  # left out; given nullable
    assert changes.added == []
    assert {f.name: f.mode for f in changes.fields}["event_id"] == "REQUIRED"  # non-null


def test_nothing_to_widen_changes_nothing() -> None:
    source = pa.schema([pa.field("event_id", pa.int64(), nullable=False)])
    table = TABLE[:1]
    changes = widened(table, source, Widening(add=True, relax=True))
    assert (changes.added, changes.relaxed, changes.fields) == ([], [], table)


def test_the_options_take_true_or_false_naming_a_bad_one() -> None:
    assert widening_option({"allowfieldaddition": "TRUE"}) == Widening(add=True)
    assert not widening_option({}).any
    with pytest.raises(SinkOptionError, match=r"allowFieldRelaxation.*'yes' is not true or false"):
        widening_option({"allowfieldrelaxation": "yes"})


@pytest.mark.spark
def test_a_connector_write_with_both_options_widens_the_table_and_lands_every_row(
    spark: SparkSession, rest: bigquery.Client, dataset: str, bq_config: BigQueryConfig
) -> None:
    """The table lacks ``amount`` and requires ``region``, which the DataFrame leaves
    out: with both options the write adds one, relaxes the other and writes every row
    once, ``amount`` in BigQuery; without them it is refused naming both."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=TABLE[:2]))
    df = spark.range(50, numPartitions=2).selectExpr("id AS event_id", "id / 2 AS amount")
    with pytest.raises(Exception, match=r"'amount'.*not in the table|'region' is REQUIRED"):
        df.write.format("onceover").option("run_id", "widen-0").mode("append").save(table)
    (
        df.write.format("onceover")
        .option("allowFieldAddition", "true")
        .option("allowFieldRelaxation", "true")
        .option("run_id", "widen-1")
        .mode("append")
        .save(table)
    )
    assert counted(rest, table) == (50, 50)
    schema = {f.name: f.mode for f in rest.get_table(table).schema}
    assert schema == {"event_id": "REQUIRED", "region": "NULLABLE", "amount": "NULLABLE"}
    (row,) = rest.query_and_wait(f"SELECT SUM(amount) AS total FROM `{table}`")
    assert row["total"] == sum(i / 2 for i in range(50))


def test_widening_leaves_the_table_fields_it_was_given_as_they_were() -> None:
    before = repr(TABLE)
    widened(TABLE, SOURCE, Widening(add=True, relax=True))
    assert repr(TABLE) == before  # region and address.city still REQUIRED


def test_a_refusal_names_the_option_that_would_fix_each_column_at_fault() -> None:
    problems = [
        "column 'amount' (double) is not in the table",
        "column 'tags' (list) is not in the table",
        "column 'region' is REQUIRED in the table but the DataFrame does not have it",
    ]
    assert widening_advice(TABLE, SOURCE, Widening(), problems) == [
        "give .option('allowFieldAddition', 'true') to add 'amount', 'tags' (NULLABLE)",
        "give .option('allowFieldRelaxation', 'true') to make 'region' NULLABLE",
    ]  # address.city and address.zip are not at fault here: not named
    assert widening_advice(TABLE, SOURCE, Widening(add=True), problems) == [
        "give .option('allowFieldRelaxation', 'true') to make 'region' NULLABLE"
    ]
    assert widening_advice(TABLE, SOURCE, Widening(add=True, relax=True), problems) == []
