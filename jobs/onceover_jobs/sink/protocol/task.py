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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from onceover_jobs.sink.errors import ArrowRefusedError
from onceover_jobs.sink.job.results import ChangeCounts, TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import SparkCall
from onceover_jobs.sink.modes import mode_of
from onceover_jobs.sink.modes.row_format import arrow_refused, arrow_settled
from onceover_jobs.sink.modes.staging import TaskContextInfo
from onceover_jobs.sink.reporting.telemetry import TASK_EVENT_FLUSH_S, Telemetry
from onceover_jobs.sink.rows.key_tally import KeyTally

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.write_api import WriteApi

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
    batches: Iterable[pa.RecordBatch], job: SinkJob, task: TaskContextInfo,
    changes: ChangeRows | None = None,
) -> Iterator[pa.RecordBatch]:  # fmt: skip
    """The partition's non-empty batches as the table takes them, stamped if asked; with
    ``datePartition``, each row checked to fall in that partition; a change data capture
    write's with each row's change type and sequence number behind its columns."""
    from onceover_jobs.sink.rows.schema import to_bigquery_arrow
    from onceover_jobs.sink.rows.stamp import stamped
    from onceover_jobs.sink.table.date_partition import check_rows

    for batch in batches:
        if batch.num_rows:
            rows = stamped(batch, job.run_id, task.batch_id) if job.options.stamp else batch
            converted = to_bigquery_arrow(rows, job.plan)
            if job.date_partition is not None:
                check_rows(converted, job.date_partition)
            if changes is not None:
                converted = changes.rows(batch, converted)
            yield converted


class ChangeRows:
    """A CDC write's rows of one partition, numbered as every attempt numbers them
    (onceover_jobs.sink.rows.change_capture): the batch's base from the ledger, the
    partition, each row's place in it; counted by kind for the batch's receipt."""

    def __init__(self, job: SinkJob, task: TaskContextInfo) -> None:
        assert job.change_capture is not None
        self.job = job
        self.capture = job.change_capture
        self.task = task
        self.row = 0
        self.base: int | None = None
        self.where = f"partition {task.partition} of {job.table}"
        self.counts = ChangeCounts()

    def rows(self, source: pa.RecordBatch, converted: pa.RecordBatch) -> pa.RecordBatch:
        from onceover_jobs.sink.rows.change_rows import (
            change_rows,
            counted_changes,
            derived_sequence_numbers,
        )

        derived = None
        if self.capture.sequence_number is None:
            if self.base is None:
                from onceover_jobs.sink.ledger.change_sequence import sequence_base

                self.base = sequence_base(self.job.ledger(), self.task.batch_id)
            derived = derived_sequence_numbers(
                self.base, self.task.partition, self.row, source.num_rows
            )
        rows = change_rows(
            source, converted, self.capture, derived=derived, where=self.where,
            start_row=self.row,
        )  # fmt: skip
        self.row += source.num_rows
        self.counts += ChangeCounts(*counted_changes(rows))
        return rows


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
        changes = ChangeRows(job, task) if job.change_capture is not None else None
        rows = converted(batches, job, task, changes)
        if changes is not None:  # proto rows: nothing to keep for a refusal of Arrow
            return replace(_written(job, client, rows, task, telemetry), changes=changes.counts)
        if arrow_settled(job):
            return _written(job, client, rows, task, telemetry)
        # BigQuery's answer to Arrow rows is not known in this process yet: the batches
        # are kept until it is (onceover_jobs.sink.modes.row_format).
        kept = Rewindable(rows, lambda: arrow_settled(job))
        try:
            return _written(job, client, kept, task, telemetry)
        except ArrowRefusedError as exc:
            if not kept.whole:
                raise
            if arrow_refused(job, str(exc)):
                telemetry.stream(exc.stream or "", mode.traits.stream_type, task.partition,
                                 task.attempt).format_refused(str(exc))  # fmt: skip
            logger.warning("%s: writing the partition again as proto rows", exc)
            return _written(job, client, kept.again(), task, telemetry)
    finally:
        telemetry.flush(TASK_EVENT_FLUSH_S)


def _written(
    job: SinkJob,
    client: WriteApi,
    rows: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:
    """The partition written in the job's mode, its keys tallied if asked."""
    mode = mode_of(job.options.mode)
    tally = KeyTally.of(job.options.key, stamped=job.options.stamp, table_fields=job.table_fields)
    if tally is None:
        return mode.write_partition(job, client, rows, task, telemetry)
    result = mode.write_partition(job, client, tally.observe(rows), task, telemetry)
    refused = result.dead_letters.keys if result.dead_letters is not None else ()
    checksum = tally.without(refused)
    return replace(result, key_checksum=checksum, key_buckets=tally.receipt())


class Rewindable(Iterator[pa.RecordBatch]):
    """Batches read, kept until ``settled()`` says they need not be sent again."""

    def __init__(self, batches: Iterator[pa.RecordBatch], settled: Callable[[], bool]) -> None:
        self._batches = batches
        self._settled = settled
        self._kept: list[pa.RecordBatch] | None = []

    @property
    def whole(self) -> bool:
        """Every batch read so far is kept: the partition can be sent again."""
        return self._kept is not None

    def __next__(self) -> pa.RecordBatch:
        batch = next(self._batches)
        if self._kept is not None:
            if self._settled():
                self._kept = None  # Arrow was taken: nothing to keep any more
            else:
                self._kept.append(batch)
        return batch

    def again(self) -> Iterator[pa.RecordBatch]:
        """The batches read so far, then the rest."""
        assert self._kept is not None
        kept, self._kept = self._kept, None
        yield from kept
        yield from self._batches
