"""``mode("overwrite")``: the table's rows (or the DataFrame's partitions of them) replaced
atomically and exactly once, judged by what BigQuery holds.

The first tests write as a user's own script does, on the shared Spark session; the fault
tests run the tasks and the driver's commit in this process, as the other committer
tests do, so a failure can be injected at each step of the overwrite and the next attempt
of the same run watched as it finishes the work: the old rows or the new ones in between,
never both, never half, and never a second swap.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest
from google.api_core.exceptions import ServiceUnavailable
from google.cloud import bigquery
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.datasource import prepare_job
from onceover_jobs.sink.errors import OverwriteError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.protocol.committer import written_by_tasks
from onceover_jobs.sink.protocol.overwrite import commit_overwrite
from onceover_jobs.sink.protocol.task import write_partition
from onceover_jobs.sink.table.overwrite import STAGING_PREFIX, scope_figures, scope_of
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DateType, LongType, StringType, StructField, StructType

from onceover.bigquery import BigQueryConfig
from onceover.ledger_files import read_swap
from tests.helpers.receiver import TOKEN, Receiver

pytestmark = pytest.mark.spark

SCHEMA = [
    bigquery.SchemaField("id", "INT64", description="the order"),
    bigquery.SchemaField("day", "DATE"),
    bigquery.SchemaField("bucket", "INT64"),
    bigquery.SchemaField("name", "STRING"),
]
SPARK_SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("day", DateType()),
        StructField("bucket", LongType()),
        StructField("name", StringType()),
    ]
)
NEW = 300
DAY = dt.date(2026, 11, 1)


def _table(rest: bigquery.Client, dataset: str, partitioning: str | None = "day") -> str:
    table = bigquery.Table(f"{dataset}.orders", schema=SCHEMA)
    table.description = "orders, replaced every night"
    if partitioning == "day":
        table.time_partitioning = bigquery.TimePartitioning(field="day")
    elif partitioning == "ingestion":
        table.time_partitioning = bigquery.TimePartitioning()
    elif partitioning == "range":
        table.range_partitioning = bigquery.RangePartitioning(
            field="bucket", range_=bigquery.PartitionRange(start=0, end=100, interval=10)
        )
    rest.create_table(table)
    return f"{dataset}.orders"


def _insert(
    rest: bigquery.Client, table: str, rows: Sequence[tuple[int, str | None, int | None]]
) -> None:
    values = ", ".join(
        f"({i}, {f'DATE {day!r}' if day else 'NULL'}, {'NULL' if b is None else b}, 'old')"
        for i, day, b in rows
    )
    rest.query(f"INSERT INTO `{table}` (id, day, bucket, name) VALUES {values}").result()


def _ids(rest: bigquery.Client, table: str) -> list[int]:
    return sorted(r.id for r in rest.query(f"SELECT id FROM `{table}`").result())


def _staging_tables(rest: bigquery.Client, dataset: str) -> list[str]:
    return [t.table_id for t in rest.list_tables(dataset) if t.table_id.startswith(STAGING_PREFIX)]


def _new_rows(spark: SparkSession, days: int = 3) -> DataFrame:
    """NEW rows, ids 0..NEW-1, over ``days`` days from DAY (bucket: id % 50)."""
    return spark.range(NEW, numPartitions=3).selectExpr(
        "id",
        f"DATE_ADD(DATE '{DAY}', CAST(id % {days} AS INT)) AS day",
        "id % 50 AS bucket",
        "CONCAT('new-', CAST(id AS STRING)) AS name",
    )


OLD = [(1000 + k, str(DAY + dt.timedelta(days=k % 5)), k * 30) for k in range(10)]
"""Ten old rows on days DAY..DAY+4, in buckets 0, 30, ..., 270 (beyond the ranges)."""


def test_an_overwrite_replaces_every_row_keeps_the_table_and_a_rerun_changes_nothing(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    # A re-run of the script is a new Spark session, whose first write to the table is the
    # run's write 0 again; in this one session, write_id names the write instead.
    write = (
        _new_rows(spark).write.format("onceover")
        .option("run_id", "nightly-1").option("write_id", "orders")
        .option("partitionOverwriteMode", "static")  # a partitioned table: say which
    )  # fmt: skip

    write.mode("overwrite").save(table)
    assert _ids(rest, table) == list(range(NEW))
    kept = rest.get_table(table)
    assert kept.description == "orders, replaced every night"
    assert kept.schema[0].description == "the order"
    assert kept.time_partitioning is not None
    assert kept.time_partitioning.field == "day"
    assert _staging_tables(rest, dataset) == []  # dropped once the swap was recorded

    _insert(rest, table, [(-1, None, None)])  # a row written since: a second swap drops it
    write.mode("overwrite").save(table)  # the same run again
    assert _ids(rest, table) == [-1, *range(NEW)]
    assert _staging_tables(rest, dataset) == []


def test_the_connectors_overwrite_runs_with_only_the_format_changed(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """``df.write.format("bigquery").option("writeMethod", "direct").mode("overwrite")
    .save("dataset.table")`` into a table that is not partitioned: its rows replaced, once
    (no run_id: a save() of its own)."""
    table = _table(rest, dataset, partitioning=None)
    _insert(rest, table, OLD)
    df = _new_rows(spark)
    df.write.format("onceover").option("writeMethod", "direct").mode("overwrite").save(table)
    assert _ids(rest, table) == list(range(NEW))
    assert _staging_tables(rest, dataset) == []


def test_a_dynamic_overwrite_replaces_only_the_days_the_dataframe_has(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """Days DAY and DAY+1 and the NULL partition replaced; DAY+2..DAY+4 untouched."""
    table = _table(rest, dataset)
    _insert(rest, table, [*OLD, (2000, None, None)])
    df = _new_rows(spark, days=2).unionByName(
        spark.sql("SELECT 5000L AS id, CAST(NULL AS DATE) AS day, 0L AS bucket, 'n' AS name")
    )
    (
        df.write.format("onceover")
        .option("partitionOverwriteMode", "dynamic")
        .mode("overwrite")
        .save(table)
    )
    untouched = [i for i, day, _ in OLD if dt.date.fromisoformat(day) >= DAY + dt.timedelta(2)]
    assert _ids(rest, table) == sorted([*untouched, *range(NEW), 5000])


def test_a_dynamic_overwrite_of_integer_ranges_replaces_their_buckets_only(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """New rows in buckets 0..49 (ranges 0-9 .. 40-49): the old rows at 0 and 30 go, those
    at 60 and 90 stay, and those beyond the ranges (__UNPARTITIONED__) stay, since no new
    row falls there."""
    table = _table(rest, dataset, partitioning="range")
    _insert(rest, table, OLD)
    (
        _new_rows(spark)
        .write.format("onceover")
        .option("spark.sql.sources.partitionOverwriteMode", "DYNAMIC")
        .mode("overwrite")
        .save(table)
    )
    kept = [i for i, _, bucket in OLD if bucket >= 50]
    assert _ids(rest, table) == sorted([*kept, *range(NEW)])


def test_the_connectors_date_partition_overwrite_replaces_that_day_only(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    """The connector README's ``.option("datePartition", "20220331").mode("overwrite")``:
    the old rows of that day go, every other day's stay; no partitionOverwriteMode needed."""
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    day = DAY + dt.timedelta(days=1)
    df = _new_rows(spark, days=1).selectExpr("id", f"DATE '{day}' AS day", "bucket", "name")
    df.write.format("onceover").option("datePartition", f"{day:%Y%m%d}").mode("overwrite").save(
        table
    )
    kept = [i for i, old_day, _ in OLD if old_day != str(day)]
    assert len(kept) == len(OLD) - 2
    assert _ids(rest, table) == sorted([*kept, *range(NEW)])
    assert _staging_tables(rest, dataset) == []


def test_a_date_partition_write_takes_only_that_days_rows_and_stops_with_nothing_written(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    df_write = _new_rows(spark, days=3).write.format("onceover")
    into_day = df_write
    with pytest.raises(Exception, match="rows are not in partition 20261101") as refused:
        into_day.option("datePartition", f"{DAY:%Y%m%d}").mode("append").save(table)
    assert "nothing of it is committed" in str(refused.value)
    assert _ids(rest, table) == [i for i, _, _ in OLD]  # not a row of the write
    (
        _new_rows(spark, days=1).write.format("onceover")
        .option("datePartition", f"{DAY:%Y%m%d}").mode("append").save(table)
    )  # fmt: skip
    assert _ids(rest, table) == sorted([*(i for i, _, _ in OLD), *range(NEW)])
    for options, says in (
        ({"datePartition": "202611"}, "names a month, but"),
        ({"datePartition": "20261101", "mode": "committed"}, "only the pending mode"),
    ):
        with pytest.raises(Exception, match="onceover option 'datePartition'") as refused:
            df_write.options(**options).mode("append").save(table)
        assert says in str(refused.value)
    assert len(_ids(rest, table)) == len(OLD) + NEW


def test_what_an_overwrite_cannot_do_is_refused_before_a_row_is_staged(
    spark: SparkSession, rest: bigquery.Client, dataset: str
) -> None:
    table = _table(rest, dataset, partitioning="ingestion")
    _insert(rest, table, OLD)
    df = _new_rows(spark)
    dynamic = df.write.format("onceover").option("partitionOverwriteMode", "dynamic")
    with pytest.raises(Exception, match="onceover option 'partitionOverwriteMode'") as refused:
        dynamic.mode("overwrite").save(table)
    assert "ingestion time" in str(refused.value)
    committed = df.write.format("onceover").option("mode", "committed")
    with pytest.raises(Exception, match="onceover option 'mode'"):
        committed.mode("overwrite").save(table)
    unsaid = df.write.format("onceover")  # the session's setting would not reach the sink
    with pytest.raises(Exception, match="onceover option 'partitionOverwriteMode'") as refused:
        unsaid.mode("overwrite").save(table)
    assert "never reaches a Python data source" in str(refused.value)
    one_day = df.write.format("onceover").option("datePartition", f"{DAY:%Y%m%d}")
    with pytest.raises(Exception, match="onceover option 'datePartition'") as refused:
        one_day.mode("overwrite").save(table)
    assert "ingestion time" in str(refused.value)
    wrong = df.write.format("onceover").option("partitionOverwriteMode", "sometimes")
    with pytest.raises(Exception, match="'sometimes' is not static or dynamic"):
        wrong.mode("overwrite").save(table)
    assert _ids(rest, table) == [i for i, _, _ in OLD]  # untouched
    assert _staging_tables(rest, dataset) == []


# -- a failure at each step, then the next attempt of the same run -------------------


@pytest.fixture
def driver_env(bq_config: BigQueryConfig, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name, value in bq_config.env().items():
        monkeypatch.setenv(name, value)
    yield  # noqa: PT022 - monkeypatch undoes the variables after the test


def _attempt(options: dict[str, str]) -> tuple[SinkJob, list[TaskResult | None]]:
    """A driver plans the write and two tasks stage the NEW rows (as Spark would run them)."""
    job = prepare_job(options, SPARK_SCHEMA, True, streaming=False)
    half = NEW // 2
    results: list[TaskResult | None] = []
    for partition in range(2):
        ids = list(range(partition * half, (partition + 1) * half))
        batch = pa.record_batch(
            [
                pa.array(ids, pa.int64()),
                pa.array([DAY] * len(ids), pa.date32()),
                pa.array([i % 50 for i in ids], pa.int64()),
                pa.array([f"new-{i}" for i in ids]),
            ],
            names=["id", "day", "bucket", "name"],
        )
        results.append(write_partition(job, [batch], TaskContextInfo(partition, 0, None)))
    resolved = written_by_tasks(job, results)
    assert resolved is not None
    return resolved, results


STEPS = ("commit.after", "overwrite.after_staged", "overwrite.before_swap", "overwrite.after_swap")


@pytest.mark.parametrize("point", STEPS)
def test_an_overwrite_failed_at_a_step_is_finished_once_by_the_next_attempt(
    point: str,
    driver_env: None,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    options = {"table": table, "run_id": "nightly-7", "write_id": "orders",
               "ledger": str(tmp_path / "ledger"), "partitionOverwriteMode": "static"}  # fmt: skip

    job, results = _attempt(options)
    monkeypatch.setenv(failpoints.ENV, f"{point}=error@1")
    failpoints.reset()
    with pytest.raises(ServiceUnavailable, match=point):
        commit_overwrite(job, results)
    swapped = point == "overwrite.after_swap"
    old = [i for i, _, _ in OLD]
    assert _ids(rest, table) == (list(range(NEW)) if swapped else old)  # never both, never half
    _insert(rest, table, [(-1, None, None)])  # a second swap would take this row away

    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()
    job, results = _attempt(options)
    if point != "commit.after":  # staged already: the tasks write nothing again
        assert all(r is not None and r.skipped for r in results), results
    commit_overwrite(job, results)
    # Not swapped yet: the next attempt's swap replaces every row, the one since too.
    assert _ids(rest, table) == ([-1] if swapped else []) + list(range(NEW))
    assert _staging_tables(rest, dataset) == []
    ledger = job.ledger()
    swap = read_swap(ledger.store, ledger.directory, None)
    assert swap is not None
    assert swap.swapped
    assert swap.staged_rows == NEW
    # counted as the swap's first attempt began: before the row written since, or after
    counted_first = point in ("overwrite.before_swap", "overwrite.after_swap")
    assert swap.rows_replaced == len(OLD) + (0 if counted_first else 1)
    assert swap.partitions is None  # the whole table


def test_the_control_plane_hears_the_step_an_overwrite_stopped_at_and_its_swap_once(
    driver_env: None,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    receiver: Receiver,
) -> None:
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    options = {"table": table, "run_id": "nightly-8", "write_id": "orders",
               "ledger": str(tmp_path / "ledger"), "partitionOverwriteMode": "dynamic",
               "monitor.url": receiver.url, "monitor.token": TOKEN}  # fmt: skip
    job, results = _attempt(options)
    monkeypatch.setenv(failpoints.ENV, "overwrite.before_swap=error@1")
    failpoints.reset()
    with pytest.raises(ServiceUnavailable):
        commit_overwrite(job, results)
    (started,) = receiver.of_type("overwrite_swap_started")  # heard before the job is asked
    assert not receiver.of_type("overwrite_swapped")
    assert (started["table"], started["write"], started["batch_id"]) == (table, "id-orders", None)
    assert started["staging"].startswith(f"{dataset}.{STAGING_PREFIX}orders_")
    assert (started["attempt"], started["staged_rows"], started["rows_replaced"]) == (0, NEW, 2)
    assert (started["partitions"], started["partition_count"]) == (["20261101"], 1)
    assert "partitions" in started["scope"]

    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()
    commit_overwrite(*_attempt(options))  # the next attempt asks for the same job
    (swapped,) = receiver.of_type("overwrite_swapped")
    assert swapped["job_id"] == started["job_id"]
    assert swapped["swapped_at"] is not None
    assert (swapped["staged_rows"], swapped["rows_replaced"]) == (NEW, 2)
    assert len(receiver.of_type("overwrite_swap_started")) == 1

    commit_overwrite(*_attempt(options))  # a re-run after success: a duplicate, nothing new
    assert len(receiver.of_type("overwrite_swap_started")) == 1
    assert len(receiver.of_type("overwrite_swapped")) == 1
    assert receiver.of_type("batch_skipped_duplicate")
    assert len(receiver.of_type("batch_committed")) == 1


def test_a_dynamic_swap_names_the_partitions_it_replaces(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str
) -> None:
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    staging = f"{dataset}.{STAGING_PREFIX}orders_x"
    rest.create_table(bigquery.Table(staging, schema=SCHEMA))
    _insert(rest, staging, [(1, str(DAY), 0), (2, str(DAY), 0), (3, None, 0)])
    scope = scope_of(rest.get_table(table), dynamic=True)
    figures = scope_figures(bq_config, table, staging, scope)
    assert figures.partitions is not None
    assert sorted(figures.partitions) == ["20261101", "__NULL__"]  # BigQuery's partition ids
    assert figures.partition_count == 2
    assert figures.rows_replaced == 2  # the old rows on DAY (k = 0, 5); none on NULL


@pytest.mark.parametrize("change", ["expired", "emptied"])
def test_an_overwrite_whose_staged_rows_are_gone_replaces_nothing(
    change: str,
    driver_env: None,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopped after staging, resumed once the staging table expired (three days) and the
    next attempt made an empty one of the same name, or once its rows were deleted: the
    swap checks, inside its own transaction, that the staging table holds exactly the
    rows staged, so it fails and rolls back instead of emptying the table."""
    table = _table(rest, dataset)
    _insert(rest, table, OLD)
    options = {"table": table, "run_id": "nightly-9", "write_id": "orders",
               "ledger": str(tmp_path / "ledger"), "partitionOverwriteMode": "static"}  # fmt: skip
    job, results = _attempt(options)
    monkeypatch.setenv(failpoints.ENV, "overwrite.after_staged=error@1")
    failpoints.reset()
    with pytest.raises(ServiceUnavailable):
        commit_overwrite(job, results)
    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()
    (staging,) = _staging_tables(rest, dataset)
    if change == "expired":
        rest.delete_table(f"{dataset}.{staging}")
    else:
        rest.query_and_wait(f"DELETE FROM `{dataset}.{staging}` WHERE id < 10")

    job, results = _attempt(options)  # the same run again: its driver re-creates the table
    with pytest.raises(OverwriteError, match="staged rows") as failed:
        commit_overwrite(job, results)
    assert "new run_id" in str(failed.value)
    assert _ids(rest, table) == [i for i, _, _ in OLD]  # nothing replaced, nothing lost
    ledger = job.ledger()
    swap = read_swap(ledger.store, ledger.directory, None)
    assert swap is not None
    assert not swap.swapped
