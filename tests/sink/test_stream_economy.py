"""Stream economy: a streaming query's CreateWriteStream calls do not grow with its
micro-batches (BigQuery allows 10,000 an hour per project and region). Counted by the
local BigQuery, which lists every stream ever created (``/admin/streams``); rows and
distinct keys counted in the table."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from google.api_core.exceptions import NotFound
from google.cloud import bigquery
from google.cloud.bigquery_storage_v1 import BigQueryWriteClient
from onceover_jobs.generate import write_files
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import CommitLimitError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.slots import StreamSlots
from onceover_jobs.sink.modes import staging
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.protocol.task import write_partition
from onceover_jobs.sink.wire.commit_limits import commit_bytes_limit
from onceover_tools.chaos.runner import ORDER_SCHEMA
from onceover_tools.localbq import LocalBigQuery
from onceover_tools.localbq.admin import write_streams
from onceover_tools.localbq.limits import create_stream_calls, limited
from pyspark.sql import DataFrame, SparkSession

from onceover.bigquery import BigQueryConfig
from tests.helpers.waiting import wait_until
from tests.helpers.writeapi import count, create_table, rows, streaming_job
from tests.sink.test_streaming import SOURCE_SCHEMA, counted


def streams_of(local_bigquery: LocalBigQuery, table: str) -> list[dict[str, object]]:
    """Every write stream ever created on ``table`` (project.dataset.table)."""
    return write_streams(local_bigquery.rest_url, table)


# -- a user's streaming query ---------------------------------------------------------


def by_key(frame: DataFrame) -> DataFrame:
    return frame.repartition(2, "event_id")


def run_query(
    spark: SparkSession,
    source: Path,
    table: str,
    checkpoint: Path,
    partitioned: Callable[[DataFrame], DataFrame] = by_key,
    **options: str,
) -> None:
    """The user's query: one file per micro-batch, ``partitioned`` (by default hashed
    into 2 partitions), into the sink with no option but the table and ``options``."""
    frame = spark.readStream.schema(SOURCE_SCHEMA).option("maxFilesPerTrigger", 1)
    (
        partitioned(frame.json(str(source)))
        .writeStream.format("onceover")
        .option("table", table)
        .option("checkpointLocation", str(checkpoint))
        .options(**options)
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )


@pytest.mark.spark
def test_a_streaming_query_keeps_one_stream_per_partition_across_batches_and_restarts(
    spark: SparkSession,
    rest: bigquery.Client,
    local_bigquery: LocalBigQuery,
    dataset: str,
    tmp_path: Path,
) -> None:
    """And under BigQuery's CreateWriteStream quota (10,000 an hour per project and
    region, then RESOURCE_EXHAUSTED), here 4 for the whole test: the query's two streams
    fit, where pending mode's two per batch (twenty) could not."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 600, 6, "json")  # six micro-batches of 100 rows
    with limited(create_streams_per_window=4, create_window_s=3600):
        run_query(spark, source, table, checkpoint)
        assert counted(rest, table) == (600, 600)
        first = streams_of(local_bigquery, table)
        # Before: two PENDING streams per micro-batch (12); now the partitions' two.
        assert [s["streamType"] for s in first] == ["BUFFERED", "BUFFERED"]

        # A restart of the query, and more batches: the same two streams go on.
        write_files(source, 400, 4, "json", start=600)
        run_query(spark, source, table, checkpoint)
        assert create_stream_calls(table.split(".", maxsplit=1)[0]) == 2
    assert counted(rest, table) == (1_000, 1_000)
    after = streams_of(local_bigquery, table)
    assert {s["name"] for s in after} == {s["name"] for s in first}
    assert sum(int(str(s["nextOffset"])) for s in after) == 1_000


@pytest.mark.spark
@pytest.mark.parametrize(("mode", "streams_per_batch"), [("buffered", 0), ("pending", 1)])
def test_empty_partitions_create_no_stream(
    spark: SparkSession,
    rest: bigquery.Client,
    local_bigquery: LocalBigQuery,
    dataset: str,
    tmp_path: Path,
    mode: str,
    streams_per_batch: int,
) -> None:
    """Eight partitions of which seven are empty: one stream (buffered: for the whole
    query; pending: one per batch), never one per empty partition."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 300, 3, "json")

    def one_key(frame: DataFrame) -> DataFrame:  # one partition of eight has rows
        return frame.repartition(8, frame.currency.substr(0, 0))

    run_query(spark, source, table, checkpoint, one_key, mode=mode)
    assert counted(rest, table) == (300, 300)
    assert len(streams_of(local_bigquery, table)) == (3 * streams_per_batch or 1)


# -- one partition's tasks, as Spark runs them --------------------------------------------

ROWS = 1_000


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


@pytest.fixture
def job(bq_config: BigQueryConfig, table: str, tmp_path: Path) -> SinkJob:
    """Committed mode, whose rows are visible per append (buffered mode, the streaming
    default, is proven through the driver's flush in test_buffered_mode)."""
    return streaming_job(
        bq_config, table, tmp_path, mode="committed", **{"request.max_bytes": "10000"}
    )


def fails_at_second_append(
    job: SinkJob, batch: int, first: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(failpoints.ENV, "append.response=error@2")
    failpoints.reset()
    with pytest.raises(Exception, match=r"append\.response"):
        write_partition(job, [rows(first, ROWS)], TaskContextInfo(0, 0, batch))
    monkeypatch.delenv(failpoints.ENV)
    failpoints.reset()


def test_a_retried_task_goes_on_where_its_batch_started_on_the_continued_stream(
    job: SinkJob,
    rest: bigquery.Client,
    table: str,
    local_bigquery: LocalBigQuery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 0))
    fails_at_second_append(job, 1, ROWS, monkeypatch)  # batch 1: some rows acknowledged
    # Spark's retry gets the same rows in other Arrow batches.
    again = pa.Table.from_batches([rows(ROWS, ROWS)]).to_batches(max_chunksize=333)
    result = write_partition(job, again, TaskContextInfo(0, 1, 1))
    assert result.rows == ROWS
    write_partition(job, [rows(2 * ROWS, ROWS)], TaskContextInfo(0, 0, 2))
    assert count(rest, table) == (3 * ROWS, 3 * ROWS)
    (stream,) = streams_of(local_bigquery, table)
    assert stream["nextOffset"] == 3 * ROWS


def test_a_batch_left_unfinished_keeps_its_stream_and_the_next_batch_takes_a_new_one(
    job: SinkJob,
    rest: bigquery.Client,
    table: str,
    local_bigquery: LocalBigQuery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A foreachBatch function that catches a failed write and goes on: the next batch
    must not continue a stream whose batch may still be replayed there."""
    write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 0))
    fails_at_second_append(job, 1, ROWS, monkeypatch)  # batch 1 left unfinished
    write_partition(job, [rows(2 * ROWS, ROWS)], TaskContextInfo(0, 0, 2))
    # Batch 1 replayed later: it goes on on its own stream.
    write_partition(job, [rows(ROWS, ROWS)], TaskContextInfo(0, 0, 1))
    assert count(rest, table) == (3 * ROWS, 3 * ROWS)
    assert sorted(int(str(s["nextOffset"])) for s in streams_of(local_bigquery, table)) == [
        ROWS,
        2 * ROWS,
    ]


# -- BigQuery's limits, enforced by the local BigQuery ------------------------------------


def test_a_pending_write_of_more_partitions_than_one_commit_takes_is_refused_before_a_stream(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    table: str,
    local_bigquery: LocalBigQuery,
    tmp_path: Path,
) -> None:
    """BigQuery: one BatchCommitWriteStreams takes at most 10,000 streams."""
    job = streaming_job(bq_config, table, tmp_path, mode="pending")
    with pytest.raises(
        CommitLimitError, match=r"more than 10,000 partitions \(this is partition 10000\)"
    ):
        write_partition(job, [rows(0, 10)], TaskContextInfo(10_000, 0, 0))
    assert streams_of(local_bigquery, table) == []
    # The driver's net: a batch of 10,001 streams writes no intent and commits nothing.
    results = [TaskResult(f"{table}/streams/s{n}", "PENDING", 1, 1, n, 0) for n in range(10_001)]
    with pytest.raises(CommitLimitError, match="10,001 streams"):
        BatchCommitter(job, 0).commit(results)
    assert job.ledger().batch(0) is None
    assert count(rest, table) == (0, 0)


@pytest.mark.parametrize(("location", "limit"), [("US", "10 TB"), ("europe-west3", "1 TB")])
def test_a_pending_batch_of_more_bytes_than_one_commit_takes_is_refused_before_its_intent(
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    tmp_path: Path,
    location: str,
    limit: str,
) -> None:
    """BigQuery: one BatchCommitWriteStreams commits at most 1 TB of pending data in a
    regional dataset, 10 TB in a multi-region one (the US). A batch one byte over its
    dataset's limit, as its tasks report it, is refused before its intent."""
    dataset = bigquery.Dataset(f"{rest.project}.t_{tmp_path.name[-8:]}_{len(location)}")
    dataset.location = location
    rest.create_dataset(dataset)
    try:
        table = create_table(rest, f"{dataset.project}.{dataset.dataset_id}")
        job = streaming_job(bq_config, table, tmp_path, mode="pending")
        over = commit_bytes_limit(location) + 1
        results = [
            TaskResult(f"{table}/streams/s{n}", "PENDING", 1, part, n, 0)
            for n, part in enumerate((over // 2, over - over // 2))
        ]
        with pytest.raises(CommitLimitError, match=rf"{over:,} bytes .* location {location}"):
            BatchCommitter(job, 0).commit(results)
        assert job.ledger().batch(0) is None
    finally:
        rest.delete_dataset(dataset, delete_contents=True, not_found_ok=True)
    assert commit_bytes_limit(location) == {"10 TB": 10 * 10**12, "1 TB": 10**12}[limit]


@pytest.mark.alone
def test_a_stream_that_expired_while_the_query_stood_still_is_replaced(
    job: SinkJob,
    rest: bigquery.Client,
    write: BigQueryWriteClient,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """BigQuery deletes a COMMITTED stream left idle for 3 days (here half a second):
    the next batch looks its slot's stream up and takes a new one, never failing on it."""
    monkeypatch.setattr(staging, "STREAM_CHECK_IDLE_S", 0.0)
    project = table.split(".", maxsplit=1)[0]
    with limited(committed_idle_s=0.5):
        write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 0))
        stream = StreamSlots(job.ledger()).current(0)
        assert stream is not None

        def expired() -> bool | None:
            try:
                write.get_write_stream(name=stream.stream, retry=None, timeout=5)
            except NotFound:
                return True
            return None

        wait_until(f"{stream.stream} to expire", expired, 10)
        write_partition(job, [rows(ROWS, ROWS)], TaskContextInfo(0, 0, 1))
        assert create_stream_calls(project) == 2
    assert count(rest, table) == (2 * ROWS, 2 * ROWS)


@pytest.mark.spark
def test_a_batch_writes_committed_streams_are_finalized_with_their_rows_checked(
    spark: SparkSession,
    rest: bigquery.Client,
    local_bigquery: LocalBigQuery,
    dataset: str,
    tmp_path: Path,
) -> None:
    """A df.write has one batch: its COMMITTED streams are never continued, so each is
    finalized once complete and its row count checked, as pending mode's are."""
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source = tmp_path / "orders"
    write_files(source, 500, 2, "json")
    (
        spark.read.schema(SOURCE_SCHEMA)
        .json(str(source))
        .repartition(2, "event_id")
        .write.format("onceover")
        .mode("append")
        .option("table", table)
        .option("mode", "committed")
        .option("run_id", f"finalized-{tmp_path.name}")
        .option("ledger", str(tmp_path / "ledger"))
        .save()
    )
    assert counted(rest, table) == (500, 500)
    streams = streams_of(local_bigquery, table)
    assert [s["state"] for s in streams] == ["FINALIZED", "FINALIZED"]
    assert sum(int(str(s["rowCount"])) for s in streams) == 500
