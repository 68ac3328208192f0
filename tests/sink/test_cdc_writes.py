"""Change data capture as a user's own script writes it (the spark-bigquery-connector's
README: a DataFrame with ``_CHANGE_TYPE``, ``writeAtLeastOnce=true``), on the shared Spark
session, judged by what BigQuery holds key by key: the docs' own example, a replay of an
older write after a newer one (converges to the newer), a streaming query, and every
refusal before a row."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from google.cloud import bigquery
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - as PySpark's own docs import it

pytestmark = pytest.mark.spark

SCHEMA = "ID long, Name string, Salary long, _CHANGE_TYPE string"


def keyed_table(rest: bigquery.Client, table_id: str, key: tuple[str, ...] = ("ID",)) -> None:
    """The docs' example table, its primary key declared (NOT ENFORCED) as tables.insert
    takes it."""
    table = bigquery.Table(
        table_id,
        schema=[
            bigquery.SchemaField("ID", "INT64"),
            bigquery.SchemaField("Name", "STRING"),
            bigquery.SchemaField("Salary", "INT64"),
        ],
    )
    if key:
        table._properties["tableConstraints"] = {"primaryKey": {"columns": list(key)}}
    rest.create_table(table)


def state(rest: bigquery.Client, table_id: str) -> dict[int, tuple[Any, ...]]:
    """The table, key by key; a key held twice fails the test."""
    rows = list(rest.query_and_wait(f"SELECT ID, Name, Salary FROM `{table_id}`"))
    found = {row["ID"]: (row["Name"], row["Salary"]) for row in rows}
    assert len(found) == len(rows), f"a key is held twice: {sorted(r['ID'] for r in rows)}"
    return found


def changes(spark: SparkSession, rows: list[tuple[Any, ...]], partitions: int = 2) -> DataFrame:
    return spark.createDataFrame(rows, SCHEMA).repartition(partitions, "ID")


def write_changes(df: DataFrame, table_id: str, **options: str) -> None:
    writer = df.write.format("onceover").option("writeAtLeastOnce", "true")
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.mode("append").save(table_id)


def test_the_docs_example_upserts_and_deletes_by_the_primary_key(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """BigQuery's "Stream table updates with change data capture": 100 Charlie 2000,
    101 Tal 3000, 102 Lee 5000; then 100 DELETE, 101 Tal 8000 UPSERT, 105 Izumi 6000
    UPSERT; "The updated table is": 101 Tal 8000, 102 Lee 5000, 105 Izumi 6000."""
    table = f"{dataset}.salaries"
    keyed_table(rest, table)
    initial = [(100, "Charlie", 2000, "UPSERT"), (101, "Tal", 3000, "UPSERT"),
               (102, "Lee", 5000, "UPSERT")]  # fmt: skip
    write_changes(changes(spark, initial), table)
    assert state(rest, table) == {100: ("Charlie", 2000), 101: ("Tal", 3000), 102: ("Lee", 5000)}
    update = [(100, None, None, "DELETE"), (101, "Tal", 8000, "upsert"),
              (105, "Izumi", 6000, "UPSERT")]  # fmt: skip
    write_changes(changes(spark, update), table, run_id="salaries-update")
    assert state(rest, table) == {101: ("Tal", 8000), 102: ("Lee", 5000), 105: ("Izumi", 6000)}


def test_an_older_write_replayed_after_a_newer_one_changes_nothing_the_newer_set(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """At least once on the wire, exactly once in effect: run A fails after one partition
    applied its changes (a task failing every attempt: the rest never sent); run B changes
    the same keys (and deletes one) and commits; A is run again under its run id, its
    failure fixed. A's replay carries the sequence numbers its first attempt had, older
    than B's, so B's values stay, B's delete stays deleted, and A's keys B never touched
    take A's values."""
    table = f"{dataset}.accounts"
    keyed_table(rest, table)
    a_rows = [(key, f"a-{key}", key, "UPSERT") for key in range(40)]
    poisoned = 39

    @F.udf("long", useArrow=False)
    def fails_while_poisoned(key: int) -> int:
        if key == poisoned:
            raise RuntimeError("injected: a row the job cannot convert yet")
        return key

    first = changes(spark, a_rows).withColumn("Salary", fails_while_poisoned("Salary"))
    with pytest.raises(Exception, match="injected"):
        write_changes(first, table, run_id="accounts-a")
    applied = state(rest, table)
    assert applied, "the first attempt applied nothing: the test shows no replay"
    assert poisoned not in applied

    b_rows: list[tuple[Any, ...]] = [
        (key, f"b-{key}", 1000 + key, "UPSERT") for key in range(0, 40, 2)
    ]
    b_rows.append((1, None, None, "DELETE"))
    write_changes(changes(spark, b_rows), table, run_id="accounts-b")

    write_changes(changes(spark, a_rows), table, run_id="accounts-a")  # fixed, replayed
    expected: dict[int, tuple[Any, ...]] = {key: (f"a-{key}", key) for key in range(40)}
    expected.update({key: (f"b-{key}", 1000 + key) for key in range(0, 40, 2)})
    del expected[1]
    assert state(rest, table) == expected


def test_a_user_given_sequence_number_orders_changes_within_one_write(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """``_CHANGE_SEQUENCE_NUMBER`` given (a source's log position, hex sections): sent as
    it is; per key the greatest wins, whatever partition or place the rows are in."""
    table = f"{dataset}.ordered"
    keyed_table(rest, table)
    rows = [
        (7, "third", 3, "UPSERT", "1/3"),
        (7, "first", 1, "UPSERT", "1/1"),
        (7, "second", 2, "UPSERT", "1/2"),
        (8, "kept", 1, "UPSERT", "A"),
        (8, None, None, "DELETE", "9"),  # older than the upsert: the row stays
    ]
    df = spark.createDataFrame(rows, f"{SCHEMA}, _CHANGE_SEQUENCE_NUMBER string")
    write_changes(df.repartition(3), table)
    assert state(rest, table) == {7: ("third", 3), 8: ("kept", 1)}


def test_a_streaming_cdc_query_ends_equal_to_its_source(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """``writeStream`` of changes, one file a micro-batch: every key ends as the last
    batch that changed it says, deleted keys gone; run again on its checkpoint, nothing
    changes."""
    table = f"{dataset}.mirror"
    keyed_table(rest, table)
    source = tmp_path / "changes"
    batches: list[list[tuple[Any, ...]]] = [
        [(key, f"v1-{key}", key, "UPSERT") for key in range(30)],
        [(key, f"v2-{key}", 2 * key, "UPSERT") for key in range(0, 30, 3)],
        [(key, None, None, "DELETE") for key in range(0, 30, 5)],
    ]
    for number, rows in enumerate(batches):
        changes(spark, rows, 1).write.mode("append").parquet(str(source / f"part={number}"))
    expected: dict[int, tuple[Any, ...]] = {}
    for rows in batches:
        for key, name, salary, kind in rows:
            if kind == "DELETE":
                expected.pop(key, None)
            else:
                expected[key] = (name, salary)
    for _ in range(2):
        (
            spark.readStream.schema(SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .parquet(str(source / "part=*"))
            .writeStream.format("onceover")
            .option("writeAtLeastOnce", "true")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .option("table", table)
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )
        assert state(rest, table) == expected


AT_LEAST_ONCE = {"writeAtLeastOnce": "true"}


@pytest.mark.parametrize(
    ("options", "key", "columns", "says"),
    [
        ({}, ("ID",), SCHEMA, "onceover option 'writeAtLeastOnce'.*_default stream"),
        ({"writeAtLeastOnce": "false"}, ("ID",), SCHEMA, "option 'writeAtLeastOnce'"),
        ({**AT_LEAST_ONCE, "row_format": "arrow"}, ("ID",), SCHEMA,
         "option 'row_format'.*proto rows"),
        (AT_LEAST_ONCE, (), SCHEMA, "has no primary key.*ADD PRIMARY KEY"),
        (AT_LEAST_ONCE, ("ID", "Name"), "ID long, Salary long, _CHANGE_TYPE string",
         "option 'Name'.*primary key is \\(ID, Name\\)"),
        (AT_LEAST_ONCE, ("ID",), "ID long, _CHANGE_SEQUENCE_NUMBER string",
         "_CHANGE_SEQUENCE_NUMBER without _CHANGE_TYPE"),
    ],
)  # fmt: skip
def test_what_a_cdc_write_cannot_be_is_refused_before_a_row(
    spark: SparkSession,
    rest: bigquery.Client,
    dataset: str,
    options: dict[str, str],
    key: tuple[str, ...],
    columns: str,
    says: str,
) -> None:
    table = f"{dataset}.refused"
    keyed_table(rest, table, key)
    typed = [column.split() for column in columns.split(", ")]
    df = spark.sql("SELECT " + ", ".join(f"CAST(1 AS {kind}) AS {name}" for name, kind in typed))
    writer = df.write.format("onceover")
    for name, value in options.items():
        writer = writer.option(name, value)
    with pytest.raises(Exception, match=says):
        writer.mode("append").save(table)
    assert state(rest, table) == {}


def test_changes_written_inside_foreach_batch_end_as_the_last_batch_says(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """A user's foreachBatch writing each micro-batch's changes with df.write: each
    micro-batch is its own write (query and batch), numbered above the one before."""
    table = f"{dataset}.via_foreach"
    keyed_table(rest, table)
    source = tmp_path / "changes"
    first: list[tuple[Any, ...]] = [(key, f"v1-{key}", key, "UPSERT") for key in range(10)]
    second: list[tuple[Any, ...]] = [
        (key, None, None, "DELETE") if key % 2 else (key, f"v2-{key}", 2 * key, "UPSERT")
        for key in range(10)
    ]
    for number, rows in enumerate((first, second)):
        changes(spark, rows, 1).write.mode("append").parquet(str(source / f"part={number}"))

    def write_batch(batch: DataFrame, _batch_id: int) -> None:
        write_changes(batch, table)

    (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1)
        .parquet(str(source / "part=*"))
        .writeStream.foreachBatch(write_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True).start().awaitTermination()
    )  # fmt: skip
    assert state(rest, table) == {key: (f"v2-{key}", 2 * key) for key in range(0, 10, 2)}
