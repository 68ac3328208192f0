"""What one Spark task does with its partition, on an executor (the first phase).

1. Work out which write the task belongs to (:mod:`onceover_jobs.sink.protocol.resolve`):
   the key of every ledger record it reads or writes.
2. Ask the ledger whether that write's batch is committed already (a replay): then it
   writes nothing.
3. Convert the rows to what the table takes (and stamp them, and tally their keys), and
   let the write's mode stage them in a stream (:mod:`onceover_jobs.sink.modes`): which
   stream, from which offset, what a retried attempt owes an earlier one is the mode's.
4. Return what the driver must commit: the stream, its rows and bytes, the rows set
   aside, the key tally (:class:`~onceover_jobs.sink.job.results.TaskResult`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace

import pyarrow as pa

from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import SparkCall
from onceover_jobs.sink.modes import mode_of
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.reporting.telemetry import TASK_EVENT_FLUSH_S, Telemetry
from onceover_jobs.sink.rows.key_tally import KeyTally

logger = logging.getLogger(__name__)


def current_task(batch_id: int | None) -> TaskContextInfo:
    """The task this runs as (Spark's TaskContext), and the micro-batch: the writer's
    ``batch_id``, or inside foreachBatch the one Spark's local properties name."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # outside Spark (unit tests)
        return TaskContextInfo(0, 0, batch_id)
    call = SparkCall.from_properties(context.getLocalProperty)
    if batch_id is None:
        batch_id = call.batch_id  # inside foreachBatch: the micro-batch
    return TaskContextInfo(context.partitionId(), context.attemptNumber(), batch_id, call)


def converted(
    batches: Iterable[pa.RecordBatch], job: SinkJob, batch_id: int | None
) -> Iterator[pa.RecordBatch]:
    """The partition's non-empty batches as the table takes them, stamped if asked; with
    ``datePartition``, each row checked to fall in that partition."""
    from onceover_jobs.sink.rows.schema import to_bigquery_arrow
    from onceover_jobs.sink.rows.stamp import stamped
    from onceover_jobs.sink.table.date_partition import check_rows

    for batch in batches:
        if batch.num_rows:
            rows = stamped(batch, job.run_id, batch_id) if job.options.stamp else batch
            converted = to_bigquery_arrow(rows, job.plan)
            if job.date_partition is not None:
                check_rows(converted, job.date_partition)
            yield converted


def write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    """Write this task's rows in the job's mode; return what the driver must commit."""
    from onceover_jobs.sink.protocol.resolve import resolve_write

    job = resolve_write(job, task.call, f"partition {task.partition} of {job.table}")
    result = _write_partition(job, batches, task)
    return replace(result, write=job.identity)


def _write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    from onceover_jobs.sink.wire.write_api import write_api

    mode = mode_of(job.options.mode)
    telemetry = Telemetry(job, task.batch_id)
    try:
        record = job.ledger().batch(task.batch_id)
        if record is not None and record.committed:
            logger.info(
                "%s is already committed; partition %d writes nothing",
                job.identity.describe(),
                task.partition,
            )
            return TaskResult(
                None, mode.traits.stream_type, 0, 0, task.partition, task.attempt, skipped=True
            )
        client = write_api(job.bigquery)  # kept by the process, for its next tasks
        rows = converted(batches, job, task.batch_id)
        tally = KeyTally.of(
            job.options.key, stamped=job.options.stamp, table_fields=job.table_fields
        )
        if tally is None:
            return mode.write_partition(job, client, rows, task, telemetry)
        result = mode.write_partition(job, client, tally.observe(rows), task, telemetry)
        refused = result.dead_letters.keys if result.dead_letters is not None else ()
        checksum = tally.without(refused)
        return replace(result, key_checksum=checksum, key_buckets=tally.receipt())
    finally:
        telemetry.flush(TASK_EVENT_FLUSH_S)
