"""What one Spark task does with its partition, on an executor (the first phase).

- ``pending``: a PENDING stream of this attempt's own; append with offsets, finalize,
  check ``row_count``, return the stream to the driver. Nothing is visible yet. A
  failed attempt's stream is never committed (an orphan, reported as one).
- ``buffered``: the partition's BUFFERED stream, kept from batch to batch
  (:mod:`jobs.sink.stream_slots`) and recorded in the ledger before the first append;
  nothing is visible until the driver flushes the batch (:mod:`jobs.sink.flush`). A
  retried attempt of a partition left part-way starts over on a new stream: what the
  earlier one sent is never flushed, so the replay need not send the same rows.
- ``committed``: the partition's COMMITTED stream, recorded in the ledger before the
  first append; a retried attempt finds it and goes on from the recorded offset.
  Rows are visible as soon as each append is acknowledged.
- ``default``: the ``_default`` stream, no offsets: at-least-once.

In every mode a task first works out which write it belongs to
(:mod:`jobs.sink.resolve`), then asks the ledger whether that write's batch is already
committed (a replay) and then writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.sink import failpoints
from jobs.sink.appender import PlannedAppend, RetryPolicy, StreamAppender
from jobs.sink.commit_limits import check_partition
from jobs.sink.errors import NonDeterministicInputError, RowCountMismatchError
from jobs.sink.flush import stream_exists
from jobs.sink.identity import SparkCall, WriteIdentity
from jobs.sink.job import SinkJob
from jobs.sink.ledger import Ledger, PartitionProgress, batch_name
from jobs.sink.options import STREAM_TYPES
from jobs.sink.requests import ArrowEncoder, RowEncoder, plan_requests
from jobs.sink.stream_rate import stream_creations
from jobs.sink.stream_slots import StreamSlots, continuation
from jobs.sink.telemetry import StreamTelemetry, Telemetry
from jobs.sink.unary import call_with_retry as call_with_retry  # noqa: PLC0414 - re-exported

if TYPE_CHECKING:
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient

logger = logging.getLogger(__name__)

EVENT_FLUSH_S = 1.0
"""How long a finishing task waits for its events; the rest is spooled."""


@dataclass(frozen=True)
class TaskContextInfo:
    partition: int
    attempt: int
    batch_id: int | None
    call: SparkCall = field(default_factory=SparkCall)


@dataclass(frozen=True)
class TaskResult:
    """What a task tells the driver (wrapped in the Spark commit message)."""

    stream: str | None
    stream_type: str
    rows: int
    bytes: int
    partition: int
    attempt: int
    skipped: bool = False
    """The batch was already committed: the task wrote nothing."""
    write: WriteIdentity | None = None
    """The write the task worked out it belongs to; the driver commits that write."""
    base: int = 0
    """Where the partition's rows start on ``stream`` (a stream continued across batches)."""


def current_task(batch_id: int | None) -> TaskContextInfo:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:  # outside Spark (unit tests)
        return TaskContextInfo(0, 0, batch_id)
    call = SparkCall.from_properties(context.getLocalProperty)
    if batch_id is None:
        batch_id = call.batch_id  # inside foreachBatch: the micro-batch
    return TaskContextInfo(context.partitionId(), context.attemptNumber(), batch_id, call)


def encoder_for(job: SinkJob) -> RowEncoder:
    if job.options.row_format == "proto":
        from jobs.sink.proto_encoder import ProtoEncoder

        return ProtoEncoder(job.schema_fields(), job.plan.arrow_schema)
    return ArrowEncoder(job.plan.arrow_schema)


def converted(
    batches: Iterable[pa.RecordBatch], job: SinkJob, batch_id: int | None
) -> Iterator[pa.RecordBatch]:
    from jobs.sink.schema import to_bigquery_arrow
    from jobs.sink.stamp import stamped

    for batch in batches:
        if batch.num_rows:
            rows = stamped(batch, job.run_id, batch_id) if job.options.stamp else batch
            yield to_bigquery_arrow(rows, job.plan)


def write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    """Write this task's rows in the job's mode; return what the driver must commit."""
    from jobs.sink.resolve import resolve_write

    job = resolve_write(job, task.call, f"partition {task.partition} of {job.table}")
    result = _write_partition(job, batches, task)
    return replace(result, write=job.write)


def _write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    from onceover.bigquery import write_client

    telemetry = Telemetry(job, task.batch_id)
    try:
        record = job.ledger().batch(task.batch_id)
        if record is not None and record.committed:
            logger.info(
                "%s is already committed; partition %d writes nothing",
                job.write.describe() if job.write else job.query_id,
                task.partition,
            )
            return TaskResult(
                None,
                STREAM_TYPES[job.options.mode],
                0,
                0,
                task.partition,
                task.attempt,
                skipped=True,
            )
        client = write_client(job.bigquery)
        writer = _WRITERS[job.options.mode]
        return writer(job, client, converted(batches, job, task.batch_id), task, telemetry)
    finally:
        telemetry.flush(EVENT_FLUSH_S)


def _policy(job: SinkJob) -> RetryPolicy:
    return RetryPolicy(deadline_s=job.options.retry_deadline_s)


def _context(job: SinkJob, telemetry: Telemetry, task: TaskContextInfo) -> str:
    return (
        f"{job.table} batch {telemetry.batch_id_text()} partition {task.partition} "
        f"attempt {task.attempt}"
    )


def _appender(
    job: SinkJob,
    client: BigQueryWriteClient,
    stream: str,
    *,
    encoder: RowEncoder,
    events: StreamTelemetry,
    telemetry: Telemetry,
    task: TaskContextInfo,
    before_send: Callable[[PlannedAppend, list[PlannedAppend]], None] | None = None,
) -> StreamAppender:
    return StreamAppender(
        client,
        stream,
        schema_payload=encoder.schema_payload,
        listener=events,
        context=_context(job, telemetry, task),
        policy=_policy(job),
        max_inflight=job.options.max_inflight,
        before_send=before_send,
    )


def _append_all(
    appender: StreamAppender,
    job: SinkJob,
    batches: Iterable[pa.RecordBatch],
    encoder: RowEncoder,
    *,
    offsets: bool,
    start_row: int = 0,
    recorded: tuple[tuple[int, int], ...] = (),
    sent: Mapping[int, tuple[int, str]] | None = None,
    acknowledged: int = 0,
    base: int = 0,
) -> int:
    """Send every request of the partition; returns the rows appended (from ``start_row``).

    ``sent``: (rows, digest) by offset of what an earlier attempt sent; each such request
    is cut again at its boundaries and must encode to the same digest, and those below
    ``acknowledged`` are not sent again (their rows count as appended). Offsets count
    the partition's rows; on the stream they start at ``base`` (a continued stream)."""
    rows = 0
    for request in plan_requests(
        batches,
        encoder,
        job.options.max_request_bytes,
        start_row=start_row,
        recorded=recorded,
        table=job.table,
    ):
        encoded = request.encoded
        before = sent.get(request.offset) if sent is not None else None
        if before is not None and before != (encoded.rows, encoded.digest):
            raise NonDeterministicInputError(
                f"the rows at offsets {request.offset}..{request.offset + before[0] - 1} are "
                "not those an earlier attempt of this partition sent there (their digests "
                "differ)"
            )
        rows += encoded.rows
        if before is not None and request.offset + encoded.rows <= acknowledged:
            continue  # in BigQuery already, and the same rows
        appender.append(
            PlannedAppend(
                offset=base + request.offset if offsets else None,
                rows=encoded.rows,
                bytes=encoded.bytes,
                rows_payload=encoded.apply,
                may_exist=(request.offset, encoded.rows) in recorded,
                digest=encoded.digest,
            )
        )
    appender.flush()
    return rows


def _create_stream(job: SinkJob, client: BigQueryWriteClient, kind: str) -> str:
    """A new PENDING, BUFFERED or COMMITTED stream on the job's table; returns its name."""
    from google.cloud.bigquery_storage_v1 import types

    write_stream = types.WriteStream(type_=getattr(types.WriteStream.Type, kind))

    def create(timeout: float) -> Any:
        stream_creations().take()  # every try counts against the quota: pace each
        return client.create_write_stream(
            parent=job.parent, write_stream=write_stream, retry=None, timeout=timeout
        )

    created = call_with_retry(job, create, what="CreateWriteStream", on=job.parent)
    return str(created.name)


# -- pending ----------------------------------------------------------------------


def _write_pending(
    job: SinkJob,
    client: BigQueryWriteClient,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:

    first = next(batches, None)
    if first is None:  # an empty partition makes no stream
        return TaskResult(None, "PENDING", 0, 0, task.partition, task.attempt)
    check_partition(job.table, task.partition)  # before a stream: one commit takes 10,000
    stream = _create_stream(job, client, "PENDING")
    events = telemetry.stream(stream, "PENDING", task.partition, task.attempt)
    events.created()
    encoder = encoder_for(job)
    appender = _appender(
        job, client, stream, encoder=encoder, events=events, telemetry=telemetry, task=task
    )
    try:
        rows = _append_all(appender, job, _chain(first, batches), encoder, offsets=True)
        appender.close()
        row_count = finalize_stream(job, client, stream)
    except BaseException as exc:
        appender.close()
        # Never committed by anyone: the driver only commits streams tasks return.
        events.orphaned(f"task attempt failed: {exc!r}"[:4000], appender.rows_acknowledged)
        raise
    events.finalized(row_count)
    if row_count != rows:
        events.orphaned(f"finalized with {row_count} rows, {rows} were appended", row_count)
        raise RowCountMismatchError(
            f"{_context(job, telemetry, task)}: stream {stream} finalized with {row_count} "
            f"rows but {rows} were appended"
        )
    return TaskResult(
        stream, "PENDING", rows, appender.bytes_acknowledged, task.partition, task.attempt
    )


def finalize_stream(job: SinkJob, client: BigQueryWriteClient, stream: str) -> int:
    def finalize(timeout: float) -> int:
        answer = client.finalize_write_stream(name=stream, retry=None, timeout=timeout)
        row_count = int(answer.row_count)
        if failpoints.hit("finalize.after"):
            from google.api_core.exceptions import ServiceUnavailable

            raise ServiceUnavailable("failpoint finalize.after: response lost")
        return row_count

    # Finalizing a finalized stream answers its row count again, so a lost response
    # is retried safely.
    return call_with_retry(job, finalize, what="FinalizeWriteStream", on=stream)


def _sent_before(progress: PartitionProgress) -> dict[int, tuple[int, str]] | None:
    """What earlier attempts sent, by offset, if recorded from the partition's first row;
    None for a record kept before digests were (or with a gap, which a record never has)."""
    sent = {int(o): (int(r), str(d)) for o, r, d in progress.sent}
    covered = 0
    for offset in sorted(sent):
        if offset != covered:
            return None
        covered += sent[offset][0]
    return sent if covered == progress.sent_rows and sent else None


def _input_changed(job: SinkJob, telemetry: Telemetry, task: TaskContextInfo, what: str) -> str:
    return (
        f"{_context(job, telemetry, task)}: {what}. The partition's input is not "
        "deterministic: it changed between attempts (a shuffle without a fixed order, a "
        "non-deterministic source or function, or another partitioning of the input), so "
        "rows already visible would mix with others. This attempt sent nothing. Make the "
        "input deterministic before the sink (df.repartition(n, key).sortWithinPartitions("
        "key), or df.cache() / df.checkpoint()), reconcile what the table holds, and run "
        "the write again under a new run id"
    )


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


# -- committed --------------------------------------------------------------------


def _write_committed(
    job: SinkJob,
    client: BigQueryWriteClient,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:

    ledger = job.ledger()
    slots = StreamSlots(ledger)
    batch = batch_name(task.batch_id)
    progress = ledger.partition(task.batch_id, task.partition)
    resumed = progress is not None
    # Even a partition an earlier attempt recorded complete is read again: its input may
    # have ended early because something upstream failed, which a Python writer sees as
    # the end of its rows, and Spark then failed that attempt (see _write_buffered). The
    # recorded requests are checked and not sent again; rows beyond them are appended.
    if progress is None:
        first = next(batches, None)
        if first is None:  # an empty partition takes no stream
            return TaskResult(None, "COMMITTED", 0, 0, task.partition, task.attempt)
        batches = _chain(first, batches)
        progress, resumed = _take_stream(job, client, slots, task, telemetry)
    events = telemetry.stream(progress.stream, "COMMITTED", task.partition, task.attempt)
    events.created(resumed=resumed)
    encoder = encoder_for(job)
    state = {"progress": replace(progress, attempt=task.attempt, complete=False)}
    start = progress.acked_rows
    base = progress.base

    def before_send(append: PlannedAppend, inflight: list[PlannedAppend]) -> None:
        assert append.offset is not None
        current = state["progress"]
        offset = append.offset - base  # the record counts the partition's rows
        end = offset + append.rows
        if end <= current.sent_rows:
            return  # already covered by the record
        # The appender lists the request being sent among those in flight already.
        pending = inflight if any(a is append for a in inflight) else [*inflight, append]
        unacked = [(a.offset - base, a.rows) for a in pending if a.offset is not None]
        acked = unacked[0][0] if unacked else end
        state["progress"] = replace(
            current,
            acked_rows=acked,
            sent_rows=end,
            inflight=[list(pair) for pair in unacked],
            sent=[*current.sent, [offset, append.rows, append.digest]],
        )
        state["progress"] = ledger.save_partition(task.batch_id, task.partition, state["progress"])

    appender = _appender(
        job,
        client,
        progress.stream,
        encoder=encoder,
        events=events,
        telemetry=telemetry,
        task=task,
        before_send=before_send,
    )
    sent = _sent_before(progress)
    if sent is not None:
        # Cut again from the first row at the recorded boundaries, and checked: the
        # acknowledged rows are not sent again, the ones in flight are re-sent.
        start = 0
        recorded = tuple((offset, rows) for offset, (rows, _) in sorted(sent.items()))
    else:  # recorded before digests were kept: on from the acknowledged offset
        recorded = tuple((int(o), int(r)) for o, r in progress.inflight)
    try:
        rows = _append_all(
            appender, job, batches, encoder, offsets=True, start_row=start, recorded=recorded,
            sent=sent, acknowledged=progress.acked_rows, base=base,
        )  # fmt: skip
    except NonDeterministicInputError as exc:
        raise NonDeterministicInputError(_input_changed(job, telemetry, task, str(exc))) from exc
    finally:
        appender.close()
    total = start + rows
    if total < progress.acked_rows:
        raise NonDeterministicInputError(
            _input_changed(
                job,
                telemetry,
                task,
                f"this attempt has {total} rows, fewer than the {progress.acked_rows} an "
                "earlier attempt wrote and BigQuery shows already",
            )
        )
    ledger.save_partition(
        task.batch_id,
        task.partition,
        replace(
            state["progress"],
            acked_rows=total,
            sent_rows=max(total, state["progress"].sent_rows),
            inflight=[],
            complete=True,
        ),
    )
    # Where the partition's next batch goes on (jobs.sink.stream_slots).
    slots.finish(task.partition, progress.stream, batch, base + total)
    return TaskResult(
        progress.stream,
        "COMMITTED",
        total,
        appender.bytes_acknowledged,
        task.partition,
        task.attempt,
        base=base,
    )


STREAM_CHECK_IDLE_S = 600.0
"""A slot's stream unused this long is looked up before it is continued: BigQuery deletes
a COMMITTED stream idle for 3 days (BUFFERED: 7), and a query may have stood still that
long."""


def _done_before(
    slots: StreamSlots, progress: PartitionProgress, task: TaskContextInfo
) -> TaskResult:
    """The batch's intent names the partition's stream: the driver took that attempt's
    result, and its commit (a replay's) flushes it. The attempt may have died before it
    told the slot: tell it again (idempotent); send nothing."""
    end = progress.base + progress.acked_rows
    slots.finish(task.partition, progress.stream, batch_name(task.batch_id), end)
    return TaskResult(
        progress.stream,
        "BUFFERED",
        progress.acked_rows,
        0,
        task.partition,
        task.attempt,
        base=progress.base,
    )


def _take_stream(
    job: SinkJob,
    client: BigQueryWriteClient,
    slots: StreamSlots,
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> tuple[PartitionProgress, bool]:
    """The partition's stream for this batch, recorded before its first append
    (invariant 4): the stream an earlier batch left in the partition's slot, continued
    where it ended, or a new one. Returns the progress and whether the stream existed."""
    kind = STREAM_TYPES[job.options.mode]
    ledger = slots.ledger
    batch = batch_name(task.batch_id)
    slot = slots.current(task.partition)
    continued = continuation(slot, batch, after_flush=kind == "BUFFERED")  # the slot read once
    if (
        continued is not None
        and slot is not None
        and time.time() - slot.taken_at > STREAM_CHECK_IDLE_S
        and not stream_exists(job, client, slot.stream)
    ):
        logger.info("stream %s is gone (expired while unused); taking a new one", slot.stream)
        continued = None  # expired while the query stood still: a new one
    if continued is not None:
        stream, base = continued
        if slot is None or slot.batch != batch:
            taken = slots.take(task.partition, stream, batch, base)
            stream, base = taken.stream, taken.base
    else:
        created = _create_stream(job, client, kind)
        taken = slots.take(task.partition, created, batch, 0)
        if taken.stream != created:  # a concurrent attempt of this batch took the slot
            telemetry.stream(created, kind, task.partition, task.attempt).orphaned(
                "another attempt of this partition took its stream slot first"
            )
        stream, base = taken.stream, taken.base
    proposed = PartitionProgress(stream=stream, attempt=task.attempt, base=base)
    progress = ledger.claim_partition(task.batch_id, task.partition, proposed)
    # A concurrent attempt that recorded first holds the partition: go on with its stream.
    return progress, continued is not None or progress != proposed


# -- buffered ---------------------------------------------------------------------


def _write_buffered(
    job: SinkJob,
    client: BigQueryWriteClient,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:
    """Append the partition to its BUFFERED stream; the driver's flush publishes it.

    Nothing is visible before that flush, so unlike committed mode a retry owes no
    earlier attempt the same rows in the same order: an attempt that finds the
    partition written by an earlier one leaves those rows unflushed on their stream
    and starts over on a new one (a shuffle's order may change between attempts).

    An earlier attempt's *complete* record proves only that its input ended, not that
    Spark took its result: when something upstream of the sink fails (a shuffle fetch,
    a Python UDF), the writer sees its rows end early and returns, and Spark fails the
    attempt afterwards. Only the driver's intent, written from the results Spark
    accepted, vouches for a partition: kept if the intent names its stream and
    BigQuery still holds it."""
    slots = StreamSlots(job.ledger())
    ledger = slots.ledger
    progress = ledger.partition(task.batch_id, task.partition)
    if progress is not None and progress.complete and _in_intent(ledger, progress, task):
        if stream_exists(job, client, progress.stream):
            return _done_before(slots, progress, task)
        logger.warning(
            "%s: stream %s of the completed partition is gone (expired before the batch was "
            "flushed); writing the partition again on a new stream",
            _context(job, telemetry, task),
            progress.stream,
        )
    first = next(batches, None)
    if first is None:  # an empty partition takes no stream
        return TaskResult(None, "BUFFERED", 0, 0, task.partition, task.attempt)
    if progress is None:
        progress, resumed = _take_stream(job, client, slots, task, telemetry)
    else:
        progress, resumed = _start_over(job, client, slots, progress, task, telemetry), False
    events = telemetry.stream(progress.stream, "BUFFERED", task.partition, task.attempt)
    events.created(resumed=resumed)
    encoder = encoder_for(job)
    appender = _appender(
        job, client, progress.stream, encoder=encoder, events=events, telemetry=telemetry,
        task=task,
    )  # fmt: skip
    try:
        rows = _append_all(
            appender, job, _chain(first, batches), encoder, offsets=True, base=progress.base
        )
    finally:
        appender.close()
    # Compare-and-swap from the revision this attempt recorded: an attempt that started
    # over since (on another stream) makes this one stop here, its rows never flushed.
    ledger.save_partition(
        task.batch_id,
        task.partition,
        replace(progress, attempt=task.attempt, acked_rows=rows, sent_rows=rows, complete=True),
    )
    slots.finish(task.partition, progress.stream, batch_name(task.batch_id), progress.base + rows)
    return TaskResult(
        progress.stream,
        "BUFFERED",
        rows,
        appender.bytes_acknowledged,
        task.partition,
        task.attempt,
        base=progress.base,
    )


def _in_intent(ledger: Ledger, progress: PartitionProgress, task: TaskContextInfo) -> bool:
    """Whether the batch's intent names ``progress``'s stream for this partition."""
    record = ledger.batch(task.batch_id)
    return record is not None and any(
        s.partition == task.partition and s.stream == progress.stream for s in record.streams
    )


def _start_over(  # noqa: PLR0917 - the task's context, as its callers have it
    job: SinkJob,
    client: BigQueryWriteClient,
    slots: StreamSlots,
    progress: PartitionProgress,
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> PartitionProgress:
    """Move the partition to a new BUFFERED stream, from its first row. What earlier
    attempts sent stays unflushed where it is, never seen. Recorded by compare-and-swap
    first: a concurrent attempt that moved or completed the partition wins."""
    created = _create_stream(job, client, "BUFFERED")
    moved = PartitionProgress(stream=created, attempt=task.attempt, revision=progress.revision)
    try:
        saved = slots.ledger.save_partition(task.batch_id, task.partition, moved)
    except BaseException:
        telemetry.stream(created, "BUFFERED", task.partition, task.attempt).orphaned(
            "another attempt of this partition moved its progress first"
        )
        raise
    slots.take(task.partition, created, batch_name(task.batch_id), 0)
    telemetry.stream(progress.stream, "BUFFERED", task.partition, progress.attempt).orphaned(
        f"attempt {progress.attempt} stopped part-way; attempt {task.attempt} writes the "
        "partition again on a new stream and this one is never flushed",
        progress.acked_rows,
    )
    return saved


# -- default ----------------------------------------------------------------------


def _write_default(
    job: SinkJob,
    client: BigQueryWriteClient,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:
    stream = f"{job.parent}/streams/_default"
    events = telemetry.stream(stream, "DEFAULT", task.partition, task.attempt)
    encoder = encoder_for(job)
    appender = _appender(
        job, client, stream, encoder=encoder, events=events, telemetry=telemetry, task=task
    )
    try:
        rows = _append_all(appender, job, batches, encoder, offsets=False)
    finally:
        appender.close()
    return TaskResult(
        stream, "DEFAULT", rows, appender.bytes_acknowledged, task.partition, task.attempt
    )


_WRITERS = {
    "pending": _write_pending,
    "buffered": _write_buffered,
    "committed": _write_committed,
    "default": _write_default,
}
