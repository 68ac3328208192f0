"""What one Spark task does with its partition, on an executor (the first phase).

- ``pending``: a PENDING stream of this attempt's own; append with offsets, finalize,
  check ``row_count``, return the stream to the driver. Nothing is visible yet. A
  failed attempt's stream is never committed (an orphan, reported as one).
- ``buffered``: the partition's BUFFERED stream, kept from batch to batch
  (:mod:`onceover_jobs.sink.ledger.slots`) and recorded in the ledger before the first append;
  nothing is visible until the driver flushes the batch (:mod:`onceover_jobs.sink.wire.flush`). A
  retried attempt of a partition starts over on a new stream: what the earlier one
  sent is never flushed, so the retry need not send the same rows.
- ``committed``: the partition's COMMITTED stream, recorded in the ledger before the
  first append; a retried attempt finds it and goes on from the recorded offset.
  Rows are visible as soon as each append is acknowledged.
- ``default``: the ``_default`` stream, no offsets: at-least-once.

In every mode a task first works out which write it belongs to
(:mod:`onceover_jobs.sink.protocol.resolve`), then asks the ledger whether that write's batch is
already committed (a replay) and then writes nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from onceover.ledger_files import StreamCommit, batch_name
from onceover.modes import traits_of
from onceover_jobs.sink.errors import LedgerError, NonDeterministicInputError, RowCountMismatchError
from onceover_jobs.sink.job.results import DeadLetters, TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import SparkCall
from onceover_jobs.sink.ledger.records import Ledger, PartitionProgress
from onceover_jobs.sink.ledger.slots import (
    READ_RACES,
    StreamSlot,
    StreamSlots,
    continuation,
)
from onceover_jobs.sink.reporting.telemetry import QUIET, StreamEvents, Telemetry
from onceover_jobs.sink.rows.dead_letter import (
    RefusedRow,
    RequestRows,
    RowRefusals,
    column_paths,
    dead_letter_batch,
)
from onceover_jobs.sink.rows.key_tally import KeyTally
from onceover_jobs.sink.wire.appender import PlannedAppend, StreamAppender
from onceover_jobs.sink.wire.commit_limits import check_partition
from onceover_jobs.sink.wire.requests import ArrowEncoder, RowEncoder, plan_requests
from onceover_jobs.sink.wire.retry import RetryPolicy
from onceover_jobs.sink.wire.stream_calls import finalize_stream, stream_exists
from onceover_jobs.sink.wire.stream_rate import stream_creations
from onceover_jobs.sink.wire.unary import call_with_retry as call_with_retry  # noqa: PLC0414 - re-exported

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.write_api import WriteApi

logger = logging.getLogger(__name__)

EVENT_FLUSH_S = 1.0
"""How long a finishing task waits for its events; the rest is spooled."""


@dataclass(frozen=True)
class TaskContextInfo:
    partition: int
    attempt: int
    batch_id: int | None
    call: SparkCall = field(default_factory=SparkCall)


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
        from onceover_jobs.sink.rows.proto_encoder import ProtoEncoder

        return ProtoEncoder(job.schema_fields(), job.plan.arrow_schema)
    return ArrowEncoder(job.plan.arrow_schema)


def converted(
    batches: Iterable[pa.RecordBatch], job: SinkJob, batch_id: int | None
) -> Iterator[pa.RecordBatch]:
    from onceover_jobs.sink.rows.schema import to_bigquery_arrow
    from onceover_jobs.sink.rows.stamp import stamped

    for batch in batches:
        if batch.num_rows:
            rows = stamped(batch, job.run_id, batch_id) if job.options.stamp else batch
            yield to_bigquery_arrow(rows, job.plan)


def write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    """Write this task's rows in the job's mode; return what the driver must commit."""
    from onceover_jobs.sink.protocol.resolve import resolve_write

    job = resolve_write(job, task.call, f"partition {task.partition} of {job.table}")
    result = _write_partition(job, batches, task)
    return replace(result, write=job.write)


def _write_partition(
    job: SinkJob, batches: Iterable[pa.RecordBatch], task: TaskContextInfo
) -> TaskResult:
    from onceover_jobs.sink.wire.write_api import write_api

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
                traits_of(job.options.mode).stream_type,
                0,
                0,
                task.partition,
                task.attempt,
                skipped=True,
            )
        client = write_api(job.bigquery)  # kept by the process, for its next tasks
        writer = _WRITERS[job.options.mode]
        rows = converted(batches, job, task.batch_id)
        tally = KeyTally.of(job)
        if tally is None:
            return writer(job, client, rows, task, telemetry)
        result = writer(job, client, tally.observe(rows), task, telemetry)
        refused = result.dead_letters.keys if result.dead_letters is not None else ()
        checksum = tally.without(refused)
        return replace(result, key_checksum=checksum, key_buckets=tally.receipt())
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
    client: WriteApi,
    stream: str,
    *,
    encoder: RowEncoder,
    events: StreamEvents,
    telemetry: Telemetry,
    task: TaskContextInfo,
    before_send: Callable[[PlannedAppend, list[PlannedAppend]], None] | None = None,
    refusals: RowRefusals | None = None,
    offset_shift: int = 0,
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
        on_row_errors=refusals,
        offset_shift=offset_shift,
    )


def _refusals(
    job: SinkJob, encoder: RowEncoder, task: TaskContextInfo, events: StreamEvents
) -> RowRefusals:
    """What the task does with rows BigQuery refuses (onceover_jobs.sink.rows.dead_letter)."""
    return RowRefusals(
        table=job.table,
        partition=task.partition,
        key=job.options.key,
        columns=column_paths(job.table_fields),
        encoder=encoder,
        dead_letter_table=job.options.dead_letter,
        reported=events.rows_rejected,
    )


def _write_dead_letters(
    job: SinkJob,
    client: WriteApi,
    refusals: RowRefusals,
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> DeadLetters | None:
    """The refused rows on a PENDING stream of the dead-letter table, finalized and
    checked, for the driver to commit with the batch; None when no row was refused.
    A failed attempt's stream is never committed (the driver commits only what tasks
    return), as its target stream is not."""
    if not refusals.refused:
        return None
    assert job.options.dead_letter is not None
    rows = dead_letter_batch(
        refusals.refused,
        run_id=job.run_id,
        query_id=job.query_id,
        batch_id=task.batch_id,
        write=telemetry.write_place(),
        table=job.table,
    )
    parent = job.dead_letter_parent
    assert parent is not None
    stream = _create_stream(job, client, "PENDING", parent=parent)
    encoder = ArrowEncoder(rows.schema)
    appender = StreamAppender(
        client,
        stream,
        schema_payload=encoder.schema_payload,
        listener=QUIET,
        context=f"{_context(job, telemetry, task)} (dead letters)",
        policy=_policy(job),
        max_inflight=job.options.max_inflight,
    )
    try:
        sent = _append_all(appender, job, [rows], encoder, offsets=True)
    finally:
        appender.close()
    row_count = finalize_stream(job, client, stream)
    if row_count != sent:
        raise RowCountMismatchError(
            f"{_context(job, telemetry, task)}: dead-letter stream {stream} finalized with "
            f"{row_count} rows but {sent} were appended"
        )
    logger.warning(
        "%s: %d rows BigQuery refused set aside for %s",
        _context(job, telemetry, task),
        sent,
        job.options.dead_letter,
    )
    return DeadLetters(
        stream, sent, appender.bytes_acknowledged, keys=tuple(r.key for r in refusals.refused)
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
    refusals: RowRefusals | None = None,
    earlier: Mapping[int, tuple[str | None, str]] | None = None,
) -> int:
    """Send every request of the partition; returns the rows read (from ``start_row``):
    those appended and those BigQuery refused (``appender.rows_refused``).

    ``sent``: (rows, digest) by offset of what an earlier attempt sent; each such request
    is cut again at its boundaries and must encode to the same digest, and those below
    ``acknowledged`` are not sent again (their rows count as appended). Offsets count
    the partition's rows; on the stream they start at ``base`` (a continued stream),
    less the rows BigQuery refused before them. ``earlier``: rows BigQuery refused when
    an earlier attempt sent them (by partition offset), taken out and set aside again
    before their request is sent, or counted if it is not sent again."""
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
        source: RequestRows | None = RequestRows.starting_at(request.rows, request.offset)
        assert source is not None
        refused = {o: why for o, why in (earlier or {}).items() if o in source.offsets}
        if refused:
            assert refusals is not None
            source = refusals.again(source, refused)
            encoded = encoder.encode(source.batch) if source is not None else encoded
        if source is not None and not (
            before is not None and request.offset + request.rows.num_rows <= acknowledged
        ):  # else in BigQuery already, and the same rows
            appender.append(
                PlannedAppend(
                    # The appender moves it down by the rows it took out before.
                    offset=base + request.offset if offsets else None,
                    rows=encoded.rows,
                    bytes=encoded.bytes,
                    rows_payload=encoded.apply,
                    may_exist=(request.offset, request.rows.num_rows) in recorded,
                    encoded=encoded,
                    source=source,
                )
            )
        if refused:  # the requests behind start that much lower on the stream
            appender.offset_shift += len(refused)
            appender.rows_refused += len(refused)
    appender.flush()
    return rows


def _create_stream(job: SinkJob, client: WriteApi, kind: str, *, parent: str | None = None) -> str:
    """A new PENDING, BUFFERED or COMMITTED stream on the job's table (or ``parent``);
    returns its name."""
    on = parent or job.parent

    def create(timeout: float) -> str:
        stream_creations().take()  # every try counts against the quota: pace each
        return client.create_write_stream(on, kind, timeout=timeout).name

    return call_with_retry(job, create, what="CreateWriteStream", on=on)


# -- pending ----------------------------------------------------------------------


def _write_pending(
    job: SinkJob,
    client: WriteApi,
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
    refusals = _refusals(job, encoder, task, events)
    appender = _appender(
        job, client, stream, encoder=encoder, events=events, telemetry=telemetry, task=task,
        refusals=refusals,
    )  # fmt: skip
    try:
        rows = _append_all(appender, job, _chain(first, batches), encoder, offsets=True)
        rows -= appender.rows_refused
        appender.close()
        row_count = finalize_stream(job, client, stream)
        dead_letters = _write_dead_letters(job, client, refusals, task, telemetry)
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
        stream, "PENDING", rows, appender.bytes_acknowledged, task.partition, task.attempt,
        dead_letters=dead_letters,
    )  # fmt: skip


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
    client: WriteApi,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:

    slots = StreamSlots(job.ledger())
    batch = batch_name(task.batch_id)
    progress = slots.ledger.partition(task.batch_id, task.partition)
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
    record = _PartitionRecord(
        job.ledger(), task, replace(progress, attempt=task.attempt, complete=False)
    )
    start = progress.acked_rows
    base = progress.base
    earlier = record.refused_rows()
    refusals = replace(_refusals(job, encoder, task, events), recorded=record.refused)
    sent = _sent_before(progress)
    if sent is not None:
        # Cut again from the first row at the recorded boundaries, and checked: the
        # acknowledged rows are not sent again, the ones in flight are re-sent.
        start = 0
        recorded = tuple((offset, rows) for offset, (rows, _) in sorted(sent.items()))
    else:  # recorded before digests were kept: on from the acknowledged offset
        recorded = tuple((int(o), int(r)) for o, r in progress.inflight)
    appender = _appender(
        job,
        client,
        progress.stream,
        encoder=encoder,
        events=events,
        telemetry=telemetry,
        task=task,
        before_send=record.before_send,
        refusals=refusals,
        # The rows refused before the first row this attempt reads: those it reads
        # again, it takes out again itself (counted twice, every offset would be low).
        offset_shift=sum(1 for offset in earlier if offset < start),
    )
    try:
        rows = _append_all(
            appender, job, batches, encoder, offsets=True, start_row=start, recorded=recorded,
            sent=sent, acknowledged=progress.acked_rows, base=base, refusals=refusals,
            earlier=earlier,
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
    _check_stream_end(appender, base + total - len(record.progress.refused), job, telemetry, task)
    on_stream = record.complete(total)
    # Where the partition's next batch goes on (onceover_jobs.sink.ledger.slots).
    slots.finish(task.partition, progress.stream, batch, base + on_stream)
    dead_letters = _write_dead_letters(job, client, refusals, task, telemetry)
    return TaskResult(
        progress.stream,
        "COMMITTED",
        on_stream,
        appender.bytes_acknowledged,
        task.partition,
        task.attempt,
        base=base,
        dead_letters=dead_letters,
    )


def _check_stream_end(
    appender: StreamAppender,
    expected: int,
    job: SinkJob,
    telemetry: Telemetry,
    task: TaskContextInfo,
) -> None:
    """The stream ends where the record says the partition's rows end (its rows but the
    refused ones): else an offset was worked out wrong and an ALREADY_EXISTS taken for
    rows that are not there, and the partition is not recorded complete."""
    if appender.end_offset is not None and appender.end_offset != expected:
        raise LedgerError(
            f"{_context(job, telemetry, task)}: the last request acknowledged on "
            f"{appender.stream} ends at offset {appender.end_offset}, but the partition's "
            f"rows end at {expected}; the partition is not recorded complete (a bug: "
            "report it with this message and the partition's ledger record)"
        )


class _PartitionRecord:
    """Committed mode: the partition's progress in the ledger, saved before each
    request goes out and before the rest of a request with refused rows does."""

    def __init__(self, ledger: Ledger, task: TaskContextInfo, progress: PartitionProgress):
        self.ledger = ledger
        self.task = task
        self.progress = progress

    def _save(self, progress: PartitionProgress) -> None:
        self.progress = self.ledger.save_partition(
            self.task.batch_id, self.task.partition, progress
        )

    def refused_rows(self) -> dict[int, tuple[str | None, str]]:
        """Column and reason of each row BigQuery refused before, by partition offset."""
        return {
            int(str(offset)): (None if column is None else str(column), str(reason))
            for offset, column, reason in self.progress.refused
        }

    def before_send(self, append: PlannedAppend, inflight: list[PlannedAppend]) -> None:
        # The record counts the partition's rows: each request by the span it was cut
        # from (its stream offset is lower by the rows refused before it).
        offset, end = append.source.span
        current = self.progress
        if end <= current.sent_rows:
            return  # already covered by the record
        # The appender lists the request being sent among those in flight already.
        pending = inflight if any(a is append for a in inflight) else [*inflight, append]
        unacked = [(a.source.span[0], a.source.span[1] - a.source.span[0]) for a in pending]
        self._save(
            replace(
                current,
                acked_rows=unacked[0][0] if unacked else end,
                sent_rows=end,
                inflight=[list(pair) for pair in unacked],
                sent=[*current.sent, [offset, end - offset, append.digest]],
            )
        )

    def refused(self, rows: list[RefusedRow]) -> None:
        current = self.progress
        refused = [*current.refused, *([r.offset, r.column, r.reason] for r in rows)]
        self._save(replace(current, refused=refused))

    def complete(self, total: int) -> int:
        """The partition's ``total`` rows are read and in BigQuery (but those refused);
        returns how many the stream holds."""
        current = self.progress
        self._save(
            replace(
                current,
                acked_rows=total,
                sent_rows=max(total, current.sent_rows),
                inflight=[],
                complete=True,
            )
        )
        return total - len(current.refused)


STREAM_CHECK_IDLE_S = 600.0
"""A slot's stream unused this long is looked up before it is continued: BigQuery deletes
a COMMITTED stream idle for 3 days (BUFFERED: 7), and a query may have stood still that
long."""


def _continuable(
    job: SinkJob,
    client: WriteApi,
    slots: StreamSlots,
    task: TaskContextInfo,
    *,
    after_flush: bool,
) -> tuple[StreamSlot | None, tuple[str, int] | None]:
    """The partition's slot (read once) and where this batch may continue its stream
    (:func:`~onceover_jobs.sink.ledger.slots.continuation`), None when it must take a new one.
    A stream unused for :data:`STREAM_CHECK_IDLE_S` is looked up first: BigQuery may
    have deleted it while the query stood still."""
    slot = slots.current(task.partition)
    continued = continuation(slot, batch_name(task.batch_id), after_flush=after_flush)
    if (
        continued is not None
        and slot is not None
        and time.time() - slot.taken_at > STREAM_CHECK_IDLE_S
        and not stream_exists(job, client, slot.stream)
    ):
        logger.info("stream %s is gone (expired while unused); taking a new one", slot.stream)
        return slot, None
    return slot, continued


def _take_stream(
    job: SinkJob,
    client: WriteApi,
    slots: StreamSlots,
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> tuple[PartitionProgress, bool]:
    """The partition's stream for this batch, recorded before its first append
    (invariant 4): the stream an earlier batch left in the partition's slot, continued
    where it ended, or a new one. Returns the progress and whether the stream existed."""
    kind = traits_of(job.options.mode).stream_type
    ledger = slots.ledger
    batch = batch_name(task.batch_id)
    slot, continued = _continuable(job, client, slots, task, after_flush=False)
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
    client: WriteApi,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:
    """Append the partition to its BUFFERED stream; the driver's flush publishes it.

    Nothing is visible before that flush, so unlike committed mode a retry owes no
    earlier attempt the same rows in the same order: an attempt that finds its
    partition's slot taken by an earlier attempt of the same batch leaves that stream
    (whatever the attempt sent there is never flushed) and writes the partition on a
    new one (a shuffle's order, a clock or a UUID may change between attempts). So the
    slot is the only record a task keeps: one compare-and-swap write per task.

    Whether an earlier attempt completed its partition is not the task's to say: when
    something upstream of the sink fails (a shuffle fetch, a Python UDF), the writer
    sees its rows end early and returns, and Spark fails the attempt afterwards. Only
    the driver's intent, written from the results Spark accepted, vouches for a
    partition: a replay that finds it returns the stream it names, sending nothing."""
    slots = StreamSlots(job.ledger())
    vouched = _in_intent(slots.ledger, task)
    if vouched is not None:
        if stream_exists(job, client, vouched.stream):
            return TaskResult(
                vouched.stream, "BUFFERED", vouched.rows, 0, task.partition, task.attempt,
                base=vouched.base,
            )  # fmt: skip
        logger.warning(
            "%s: stream %s the batch's intent names is gone (expired before the batch was "
            "flushed); writing the partition again on a new stream",
            _context(job, telemetry, task),
            vouched.stream,
        )
    first = next(batches, None)
    if first is None:  # an empty partition takes no stream
        return TaskResult(None, "BUFFERED", 0, 0, task.partition, task.attempt)
    stream, base, resumed = _take_buffered(job, client, slots, task, telemetry)
    events = telemetry.stream(stream, "BUFFERED", task.partition, task.attempt)
    events.created(resumed=resumed)
    encoder = encoder_for(job)
    refusals = _refusals(job, encoder, task, events)
    appender = _appender(
        job, client, stream, encoder=encoder, events=events, telemetry=telemetry, task=task,
        refusals=refusals,
    )  # fmt: skip
    try:
        rows = _append_all(appender, job, _chain(first, batches), encoder, offsets=True, base=base)
        rows -= appender.rows_refused  # what the stream holds: the flush's end
    finally:
        appender.close()
    dead_letters = _write_dead_letters(job, client, refusals, task, telemetry)
    return TaskResult(
        stream, "BUFFERED", rows, appender.bytes_acknowledged, task.partition, task.attempt,
        base=base, dead_letters=dead_letters,
    )  # fmt: skip


def _in_intent(ledger: Ledger, task: TaskContextInfo) -> StreamCommit | None:
    """The stream the batch's intent names for this partition, if there is an intent."""
    record = ledger.batch(task.batch_id)
    if record is None:
        return None
    return next((s for s in record.streams if s.partition == task.partition), None)


def _take_buffered(
    job: SinkJob,
    client: WriteApi,
    slots: StreamSlots,
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> tuple[str, int, bool]:
    """The partition's stream and the offset to write from, saved in its slot before the
    first append: where the last batch's flush left the slot's stream, or a new stream.
    Never a stream another attempt of this batch took: a slot this batch took already
    (an earlier attempt, or one racing this) gets a new stream. Returns the stream, the
    offset and whether the stream existed."""
    batch = batch_name(task.batch_id)
    slot, continued = _continuable(job, client, slots, task, after_flush=True)
    if continued is not None:
        stream, base = continued
        taken = StreamSlot(stream=stream, batch=batch, base=base, taken_at=round(time.time(), 3))
        if slots.save(task.partition, taken, after=slot):
            return stream, base, True
        slot = slots.current(task.partition)  # another attempt of this batch took it
    elif slot is not None and slot.batch == batch:
        telemetry.stream(slot.stream, "BUFFERED", task.partition, task.attempt).orphaned(
            f"an earlier attempt of batch {batch} wrote here; attempt {task.attempt} writes "
            "the partition again on a new stream and this batch's rows here are never flushed"
        )
    created = _create_stream(job, client, "BUFFERED")
    for _ in range(READ_RACES):
        taken = StreamSlot(stream=created, batch=batch, base=0, taken_at=round(time.time(), 3))
        if slots.save(task.partition, taken, after=slot):
            return created, 0, False
        slot = slots.current(task.partition)
    raise LedgerError(f"partition {task.partition}: its stream slot kept changing")


# -- default ----------------------------------------------------------------------


def _write_default(
    job: SinkJob,
    client: WriteApi,
    batches: Iterator[pa.RecordBatch],
    task: TaskContextInfo,
    telemetry: Telemetry,
) -> TaskResult:
    stream = f"{job.parent}/streams/_default"
    events = telemetry.stream(stream, "DEFAULT", task.partition, task.attempt)
    encoder = encoder_for(job)
    refusals = _refusals(job, encoder, task, events)
    appender = _appender(
        job, client, stream, encoder=encoder, events=events, telemetry=telemetry, task=task,
        refusals=refusals,
    )  # fmt: skip
    try:
        rows = _append_all(appender, job, batches, encoder, offsets=False)
        rows -= appender.rows_refused
    finally:
        appender.close()
    dead_letters = _write_dead_letters(job, client, refusals, task, telemetry)
    return TaskResult(
        stream, "DEFAULT", rows, appender.bytes_acknowledged, task.partition, task.attempt,
        dead_letters=dead_letters,
    )  # fmt: skip


_WRITERS = {
    "pending": _write_pending,
    "buffered": _write_buffered,
    "committed": _write_committed,
    "default": _write_default,
}
