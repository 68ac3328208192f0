"""Buffered mode, the streaming default: each partition keeps one BUFFERED stream from
batch to batch, and the driver's commit flushes it to the batch's last row.

The tests play Spark's part (a task per partition, then the driver's commit or its
crash) against the local BigQuery, whose FlushRows answers as BigQuery's does
(``buffered_flush``), and count rows and distinct keys in the table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from google.cloud import bigquery
from onceover_jobs.generate import write_files
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import NonDeterministicInputError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.protocol.task import write_partition
from onceover_tools.chaos.runner import ORDER_SCHEMA
from onceover_tools.localbq import LocalBigQuery
from onceover_tools.localbq.admin import write_streams
from onceover_tools.localbq.limits import create_stream_calls, limited
from pyspark.sql import Column, SparkSession

from onceover.bigquery import BigQueryConfig
from tests.helpers.writeapi import count, create_table, rows, streaming_job
from tests.sink.test_streaming import SOURCE_SCHEMA, counted

ROWS = 1_000


@pytest.fixture
def table(rest: bigquery.Client, dataset: str) -> str:
    return create_table(rest, dataset)


@pytest.fixture
def job(bq_config: BigQueryConfig, table: str, tmp_path: Path) -> SinkJob:
    # No mode: the streaming sink's default, buffered.
    made = streaming_job(bq_config, table, tmp_path, **{"request.max_bytes": "10000"})
    assert made.options.mode == "buffered"
    return made


def arm(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv(failpoints.ENV, spec)
    failpoints.reset()


def disarm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(failpoints.ENV, raising=False)
    failpoints.reset()


def write_batch(job: SinkJob, batch: int, *starts: int) -> list[TaskResult]:
    """One task per partition, partition ``p`` writing ROWS rows from ``starts[p]``."""
    return [
        write_partition(job, [rows(start, ROWS)], TaskContextInfo(p, 0, batch))
        for p, start in enumerate(starts)
    ]


def streams_of(local_bigquery: LocalBigQuery, table: str) -> list[dict[str, object]]:
    return write_streams(local_bigquery.rest_url, table)


def shuffled(start: int) -> Iterator[pa.RecordBatch]:
    """The partition's rows in another order: what a shuffle may hand a replay."""
    batch = rows(start, ROWS)
    yield from pa.Table.from_batches([batch]).take(list(range(ROWS))[::-1]).to_batches(250)


def test_rows_are_unseen_until_the_flush_and_each_partition_keeps_its_stream(
    job: SinkJob, rest: bigquery.Client, table: str, local_bigquery: LocalBigQuery
) -> None:
    project = table.split(".", maxsplit=1)[0]
    before = create_stream_calls(project)
    for batch in range(3):
        results = write_batch(job, batch, 2 * batch * ROWS, (2 * batch + 1) * ROWS)
        assert count(rest, table) == (2 * batch * ROWS, 2 * batch * ROWS)  # not yet
        BatchCommitter(job, batch).commit(results)
        assert count(rest, table) == (2 * (batch + 1) * ROWS, 2 * (batch + 1) * ROWS)
    assert create_stream_calls(project) - before == 2  # one per partition, once
    streams = streams_of(local_bigquery, table)
    assert [s["streamType"] for s in streams] == ["BUFFERED", "BUFFERED"]
    assert [s["nextOffset"] for s in streams] == [3 * ROWS, 3 * ROWS]


def test_a_retry_that_sees_its_rows_in_another_order_starts_over_unseen(
    job: SinkJob,
    rest: bigquery.Client,
    table: str,
    local_bigquery: LocalBigQuery,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The failure committed mode cannot take: an attempt dies after some appends were
    acknowledged, and the retry gets the same rows in another order (a shuffle without
    a sort). Nothing of the first attempt was flushed, so the retry writes the whole
    partition on a new stream and the first stream's rows are never seen."""
    BatchCommitter(job, 0).commit(write_batch(job, 0, 0))
    arm(monkeypatch, "append.response=error@3")
    with pytest.raises(Exception, match=r"append\.response"):
        write_partition(job, [rows(ROWS, ROWS)], TaskContextInfo(0, 0, 1))
    disarm(monkeypatch)
    retried = write_partition(job, shuffled(ROWS), TaskContextInfo(0, 1, 1))
    BatchCommitter(job, 1).commit([retried])
    assert count(rest, table) == (2 * ROWS, 2 * ROWS)
    offsets = sorted(int(str(s["nextOffset"])) for s in streams_of(local_bigquery, table))
    assert offsets == [ROWS, 2 * ROWS]  # the abandoned tail, and the retry's whole partition

    # The next batch goes on on the retry's stream (the slot moved there).
    BatchCommitter(job, 2).commit(write_batch(job, 2, 2 * ROWS))
    assert count(rest, table) == (3 * ROWS, 3 * ROWS)
    assert len(streams_of(local_bigquery, table)) == 2


def test_committed_mode_refuses_the_same_retry(
    bq_config: BigQueryConfig, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why buffered is the streaming default: in committed mode the first attempt's
    rows are visible, so the retry must send the same rows in the same order."""
    job = streaming_job(
        bq_config, table, tmp_path, mode="committed", **{"request.max_bytes": "10000"}
    )
    arm(monkeypatch, "append.response=error@3")
    with pytest.raises(Exception, match=r"append\.response"):
        write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 0, 0))
    disarm(monkeypatch)
    with pytest.raises(NonDeterministicInputError):
        write_partition(job, shuffled(0), TaskContextInfo(0, 1, 0))


@pytest.mark.parametrize("repeated_flush", ["already_exists", "ok"])
@pytest.mark.parametrize("fault", ["flush.between=error@1", "flush.after=drop@1"])
def test_a_flush_cut_short_is_finished_by_the_replay_exactly_once(
    job: SinkJob,
    rest: bigquery.Client,
    table: str,
    monkeypatch: pytest.MonkeyPatch,
    fault: str,
    repeated_flush: str,
) -> None:
    """The driver stops after flushing one partition of two (``flush.between``): the
    replay flushes every stream of the intent again. One flush's answer is lost
    (``flush.after``): the driver asks again at once. BigQuery's answer to a repeated
    flush is not documented; the local BigQuery gives both answers it might
    (ALREADY_EXISTS, as Beam reads it, or OK), and either way each row is in the table
    once."""
    with limited(repeated_flush=repeated_flush):
        results = write_batch(job, 0, 0, ROWS)
        arm(monkeypatch, fault)
        if fault.startswith("flush.between"):
            with pytest.raises(Exception, match=r"flush\.between"):  # the driver "died"
                BatchCommitter(job, 0).commit(results)
            assert count(rest, table) == (ROWS, ROWS)  # one partition visible, for now
        else:
            assert BatchCommitter(job, 0).commit(results).committed
        disarm(monkeypatch)
        replay = write_batch(job, 0, 0, ROWS)  # Spark's replay: the tasks send nothing
        record = BatchCommitter(job, 0).commit(replay)
        assert record.committed
        assert count(rest, table) == (2 * ROWS, 2 * ROWS)
        BatchCommitter(job, 1).commit(write_batch(job, 1, 2 * ROWS, 3 * ROWS))
    assert count(rest, table) == (4 * ROWS, 4 * ROWS)


def test_a_batch_never_flushed_is_not_published_by_the_next_one(
    job: SinkJob, rest: bigquery.Client, table: str, local_bigquery: LocalBigQuery
) -> None:
    """A foreachBatch call that caught its write's failure and went on: batch 1's
    partition completed but its batch was never flushed. Batch 2 must not continue that
    stream (its flush would publish batch 1's rows); batch 1, replayed later, is
    written again (no intent vouches for its first attempt) and flushed by its commit."""
    BatchCommitter(job, 0).commit(write_batch(job, 0, 0))
    unflushed = write_batch(job, 1, ROWS)  # no commit: the driver gave up on it
    BatchCommitter(job, 2).commit(write_batch(job, 2, 2 * ROWS))
    assert count(rest, table) == (2 * ROWS, 2 * ROWS)  # batch 1 unseen
    assert len(streams_of(local_bigquery, table)) == 2
    replayed = write_batch(job, 1, ROWS)
    assert [r.stream for r in replayed] != [r.stream for r in unflushed]
    BatchCommitter(job, 1).commit(replayed)
    assert count(rest, table) == (3 * ROWS, 3 * ROWS)


@pytest.mark.parametrize("mode", ["buffered", "committed"])
def test_an_attempt_whose_input_ended_early_does_not_vouch_for_its_partition(
    bq_config: BigQueryConfig, rest: bigquery.Client, table: str, tmp_path: Path, mode: str
) -> None:
    """When something upstream of the sink fails (a shuffle fetch, a Python UDF), the
    sink's Python writer sees its rows end early and returns; Spark fails the attempt
    afterwards and never hands its result to the driver. The retry has every row: it
    must write them all, not trust the earlier attempt's "complete" (buffered: a new
    stream; committed: the recorded rows checked, the rest appended)."""
    job = streaming_job(bq_config, table, tmp_path, mode=mode, **{"request.max_bytes": "10000"})
    write_partition(job, [rows(0, 600)], TaskContextInfo(0, 0, 0))  # cut short
    retried = write_partition(job, [rows(0, ROWS)], TaskContextInfo(0, 1, 0))
    assert retried.rows == ROWS
    BatchCommitter(job, 0).commit([retried])
    assert count(rest, table) == (ROWS, ROWS)
    BatchCommitter(job, 1).commit(write_batch(job, 1, ROWS))
    assert count(rest, table) == (2 * ROWS, 2 * ROWS)


# -- a user's streaming query -------------------------------------------------------


def tagged_once_failing(fail_after: int) -> Column:
    """A user's column no replay reproduces (a fresh UUID per row, as ``uuid4`` in a
    UDF gives), with a task that dies part-way the first time: partition 0's first
    attempt raises at its ``fail_after``-th row, after earlier rows were sent."""
    import uuid

    from pyspark import TaskContext
    from pyspark.sql import functions as F  # noqa: N812 - PySpark's own convention
    from pyspark.sql.types import StringType

    seen = [0]  # per task: the UDF is unpickled afresh for each

    def tag(event_id: int) -> str:
        context = TaskContext.get()
        assert context is not None  # a UDF runs in a task
        seen[0] += 1
        if context.partitionId() == 0 and context.attemptNumber() == 0 and seen[0] > fail_after:
            raise RuntimeError(f"executor lost (the test's) after event {event_id}")
        return str(uuid.uuid4())

    return F.udf(tag, StringType(), useArrow=False).asNondeterministic()("event_id")


@pytest.mark.spark
def test_a_users_query_whose_retry_sees_other_rows_is_exact_by_default(
    spark: SparkSession, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    """A user's ``writeStream`` with default options: a task dies part-way and Spark's
    retry computes other values for the rows (here a UUID column; a shuffle's order or a
    clock does the same). Buffered mode writes the retry on a new stream and the table
    holds each row once. (Committed mode, whose first rows are visible already, stops
    with NonDeterministicInputError: test_committed_mode_refuses_the_same_retry.) Before
    the sink stopped trusting an attempt's own "complete", this lost 432 of 4,000 rows:
    the failing attempt's writer saw its rows end early and recorded its partition done.
    """
    table = f"{dataset}.orders"
    rest.create_table(bigquery.Table(table, schema=ORDER_SCHEMA))
    source, checkpoint = tmp_path / "orders", tmp_path / "ckpt"
    write_files(source, 2_000, 1, "json")  # one micro-batch, about 1,000 rows a partition
    # Small Arrow batches, so the sink sends rows before the failing one is computed.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
    try:
        (
            spark.readStream.schema(SOURCE_SCHEMA)
            .option("maxFilesPerTrigger", 1)
            .json(str(source))
            .repartition(2, "event_id")
            .withColumn("order_id", tagged_once_failing(fail_after=800))
            .writeStream.format("onceover")
            .option("table", table)
            .option("checkpointLocation", str(checkpoint))
            .option("request.max_bytes", "10000")
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert counted(rest, table) == (2_000, 2_000)
