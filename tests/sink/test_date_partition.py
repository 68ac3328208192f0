"""``datePartition``, the parts that need no Spark: the option's form, the table it may
name a partition of, the rows it takes, and the scope an overwrite of it replaces, counted
in the local BigQuery."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.sink.errors import RowsOutsidePartitionError, SinkOptionError
from onceover_jobs.sink.table.date_partition import (
    DatePartition,
    check_rows,
    date_partition_option,
    resolve,
)
from onceover_jobs.sink.table.overwrite import scope_figures, scope_of

from onceover.bigquery import BigQueryConfig

UTC = dt.UTC


def _table(
    column_type: str = "DATE", unit: str = "DAY", *, field: str | None = "day"
) -> bigquery.Table:
    table = bigquery.Table(
        "p.d.orders",
        schema=[bigquery.SchemaField("id", "INT64"), bigquery.SchemaField("day", column_type)],
    )
    table.time_partitioning = bigquery.TimePartitioning(type_=unit, field=field)
    return table


@pytest.mark.parametrize("value", ["20220331", "2022033113", "202203", "2022", " 20220331 "])
def test_the_option_takes_bigquerys_partition_ids(value: str) -> None:
    assert date_partition_option({"datepartition": value}) == value.strip()


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("2022-03-31", "names no partition"),
        ("2022331", "names no partition"),
        ("20220230", "is not a date"),
        ("2022033125", "is not a date"),
        ("202213", "is not a date"),
    ],
)
def test_a_value_that_names_no_partition_is_refused_naming_the_option(
    value: str, says: str
) -> None:
    with pytest.raises(SinkOptionError, match=f"'datePartition'.*{says}"):
        date_partition_option({"datepartition": value})


@pytest.mark.parametrize(
    ("value", "unit", "start", "end"),
    [
        ("20220331", "DAY", dt.datetime(2022, 3, 31), dt.datetime(2022, 4, 1)),
        ("2022033123", "HOUR", dt.datetime(2022, 3, 31, 23), dt.datetime(2022, 4, 1)),
        ("202212", "MONTH", dt.datetime(2022, 12, 1), dt.datetime(2023, 1, 1)),
        ("2022", "YEAR", dt.datetime(2022, 1, 1), dt.datetime(2023, 1, 1)),
    ],
)
def test_the_partition_is_resolved_in_the_tables_own_unit(
    value: str, unit: str, start: dt.datetime, end: dt.datetime
) -> None:
    partition = resolve(_table("TIMESTAMP", unit), value)
    assert (partition.unit, partition.column, partition.start, partition.end) == (
        unit, "day", start, end,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("table", "says"),
    [
        (_table(unit="MONTH"), "names a day, but p.d.orders is partitioned by MONTH of day: "
                               "give YYYYMM"),
        (_table(field=None), "partitioned by ingestion time"),
        (bigquery.Table("p.d.orders"), "is not partitioned"),
    ],
)  # fmt: skip
def test_a_table_without_that_partition_is_refused_naming_why(
    table: bigquery.Table, says: str
) -> None:
    with pytest.raises(SinkOptionError, match="'datePartition'") as refused:
        resolve(table, "20220331")
    assert says in str(refused.value)
    assert "Nothing was written" in str(refused.value)


def test_an_integer_range_table_has_no_date_partition() -> None:
    table = bigquery.Table("p.d.orders", schema=[bigquery.SchemaField("n", "INT64")])
    table.range_partitioning = bigquery.RangePartitioning(
        field="n", range_=bigquery.PartitionRange(start=0, end=10, interval=1)
    )
    with pytest.raises(SinkOptionError, match="by integer range partitioned"):
        resolve(table, "20220331")


def _rows(kind: pa.DataType, values: list[object]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(range(len(values)), pa.int64()), pa.array(values, kind)], names=["id", "day"]
    )


@pytest.mark.parametrize(
    ("column_type", "kind", "inside", "outside"),
    [
        ("DATE", pa.date32(), [dt.date(2022, 3, 31)], [dt.date(2022, 4, 1), None]),
        (
            "TIMESTAMP",
            pa.timestamp("us", tz="UTC"),
            [dt.datetime(2022, 3, 31, tzinfo=UTC), dt.datetime(2022, 3, 31, 23, 59, tzinfo=UTC)],
            [dt.datetime(2022, 3, 30, 23, 59, 59, 999999, tzinfo=UTC)],
        ),
        (
            "DATETIME",
            pa.timestamp("us"),
            [dt.datetime(2022, 3, 31, 12)],
            [dt.datetime(2022, 4, 1), dt.datetime(2021, 3, 31)],
        ),
    ],
)
def test_rows_are_checked_against_the_partitions_bounds(
    column_type: str, kind: pa.DataType, inside: list[object], outside: list[object]
) -> None:
    partition = resolve(_table(column_type), "20220331")
    check_rows(_rows(kind, inside), partition)  # all in: nothing said
    with pytest.raises(RowsOutsidePartitionError) as refused:
        check_rows(_rows(kind, [*inside, *outside]), partition)
    message = str(refused.value)
    assert f"{len(outside)} of {len(inside) + len(outside)} rows are not in partition 20220331" in (
        message
    )
    assert "nothing of it is committed" in message
    if None in outside:
        assert "NULL" in message


def test_rows_without_the_partitioning_column_are_refused() -> None:
    partition = resolve(_table(), "20220331")
    batch = pa.RecordBatch.from_arrays([pa.array([1], pa.int64())], names=["id"])
    with pytest.raises(RowsOutsidePartitionError, match="no day column"):
        check_rows(batch, partition)


def test_an_overwrite_of_a_date_partition_replaces_that_partition_only(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    """The swap's scope, run as BigQuery runs it: the rows of 2022-03-31 counted and
    named as the partition replaced; the day before and the NULL partition not."""
    table = f"{dataset}.orders"
    created = rest.create_table(_table_at(table))
    rest.query_and_wait(
        f"INSERT INTO `{table}` (id, day) VALUES (1, DATE '2022-03-31'), "
        "(2, DATE '2022-03-31'), (3, DATE '2022-03-30'), (4, NULL)"
    )
    partition = resolve(created, "20220331")
    scope = scope_of(created, dynamic=False, partition=partition)
    figures = scope_figures(bq_config, table, table, scope)
    assert (figures.rows_replaced, figures.partitions, figures.partition_count) == (
        2, ("20220331",), 1,
    )  # fmt: skip
    assert scope.describe() == "the rows of partition 20220331 (by day)"
    assert isinstance(partition, DatePartition)


def _table_at(table_id: str) -> bigquery.Table:
    table = _table()
    table = bigquery.Table(table_id, schema=table.schema)
    table.time_partitioning = bigquery.TimePartitioning(field="day")
    return table
