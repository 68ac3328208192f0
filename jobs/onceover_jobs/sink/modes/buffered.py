"""``buffered``: the ``writeStream`` default. One BUFFERED stream per partition, continued
from micro-batch to micro-batch (:mod:`onceover_jobs.sink.ledger.slots`), so stream
creation does not grow with the number of batches; rows become visible when the driver
flushes each stream to the batch's last row (:mod:`onceover_jobs.sink.wire.flush`).

- Nothing is visible before the flush, so a retried task owes an earlier attempt nothing:
  it leaves the stream an earlier attempt of the batch took (never flushed) and writes
  the partition again on a new one. The slot is the only record a task keeps.
- Publishing is one flush per stream, not one atomic call: between a crash and the
  replay that finishes them, some partitions of a batch can be visible and others not
  yet. A replay that finds the intent flushes every stream again (a flush to an offset
  already flushed publishes nothing), then the slots go on from the flushed ends.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from onceover.ledger_files import BatchRecord, StreamCommit, batch_name
from onceover.modes import TRAITS
from onceover_jobs.sink.errors import IntentUnresolvableError, LedgerError, StreamsGoneError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.ledger.slots import READ_RACES, StreamSlot, StreamSlots
from onceover_jobs.sink.modes.base import CommitContext, WriteMode
from onceover_jobs.sink.wire.flush import flush_batch
from onceover_jobs.sink.wire.stream_calls import stream_exists

if TYPE_CHECKING:
    import pyarrow as pa

    from onceover_jobs.sink.ledger.records import Ledger
    from onceover_jobs.sink.modes.staging import Stage, TaskContextInfo

logger = logging.getLogger(__name__)


class BufferedMode(WriteMode):
    traits = TRAITS["buffered"]

    def write(self, stage: Stage, batches: Iterator[pa.RecordBatch]) -> TaskResult:
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
        from onceover_jobs.sink.modes.staging import chained, encoder_for

        job, task, kind = stage.job, stage.task, self.traits.stream_type
        slots = StreamSlots(job.ledger())
        vouched = _in_intent(slots.ledger, task)
        if vouched is not None:
            if stage.stream_exists(vouched.stream):
                return TaskResult(
                    vouched.stream, kind, vouched.rows, 0, task.partition, task.attempt,
                    base=vouched.base,
                )  # fmt: skip
            logger.warning(
                "%s: stream %s the batch's intent names is gone (expired before the batch "
                "was flushed); writing the partition again on a new stream",
                stage.label,
                vouched.stream,
            )
        first = next(batches, None)
        if first is None:  # an empty partition takes no stream
            return TaskResult(None, kind, 0, 0, task.partition, task.attempt)
        stream, base, resumed = self._take_stream(stage, slots)
        events = stage.events(stream, kind)
        events.created(resumed=resumed)
        encoder = encoder_for(job)
        refusals = stage.refusals(encoder, events)
        appender = stage.appender(stream, encoder=encoder, events=events, refusals=refusals)
        try:
            rows = stage.append_all(
                appender, chained(first, batches), encoder, offsets=True, base=base
            )
            rows -= appender.rows_refused  # what the stream holds: the flush's end
        finally:
            appender.close()
        dead_letters = stage.dead_letters(refusals)
        return TaskResult(
            stream, kind, rows, appender.bytes_acknowledged, task.partition, task.attempt,
            base=base, dead_letters=dead_letters,
        )  # fmt: skip

    def _take_stream(self, stage: Stage, slots: StreamSlots) -> tuple[str, int, bool]:
        """The partition's stream and the offset to write from, saved in its slot before
        the first append: where the last batch's flush left the slot's stream, or a new
        stream. Never a stream another attempt of this batch took: a slot this batch took
        already (an earlier attempt, or one racing this) gets a new stream. Returns the
        stream, the offset and whether the stream existed."""
        task, kind, batch = stage.task, self.traits.stream_type, stage.batch
        slot, continued = stage.continuable(slots, after_flush=True)
        if continued is not None:
            stream, base = continued
            taken = StreamSlot(stream=stream, batch=batch, base=base, taken_at=_now())
            if slots.save(task.partition, taken, after=slot):
                return stream, base, True
            slot = slots.current(task.partition)  # another attempt of this batch took it
        elif slot is not None and slot.batch == batch:
            stage.events(slot.stream, kind).orphaned(
                f"an earlier attempt of batch {batch} wrote here; attempt {task.attempt} "
                "writes the partition again on a new stream and this batch's rows here are "
                "never flushed"
            )
        created = stage.create_stream(kind)
        for _ in range(READ_RACES):
            taken = StreamSlot(stream=created, batch=batch, base=0, taken_at=_now())
            if slots.save(task.partition, taken, after=slot):
                return created, 0, False
            slot = slots.current(task.partition)
        raise LedgerError(f"partition {task.partition}: its stream slot kept changing")

    def publish(self, ctx: CommitContext, intent: BatchRecord) -> str | None:
        """Flush each stream to its last row, then let each slot go on from there (a crash
        before that costs the next batch a new stream). BigQuery gives no commit time."""
        slots = StreamSlots(ctx.ledger)
        batch = batch_name(ctx.batch_id)

        def go_on(stream: StreamCommit) -> None:
            slots.flushed(stream.partition, stream.stream, batch, stream.base + stream.rows)

        def flushed_before(stream: StreamCommit) -> bool:
            # The slot shows the stream flushed past the batch's rows, or a later batch
            # went on from there (which it does only after this batch's flush).
            slot, end = slots.current(stream.partition), stream.base + stream.rows
            return (
                slot is not None
                and slot.stream == stream.stream
                and ((slot.flushed or 0) >= end or slot.base >= end)
            )

        flush_batch(
            ctx.client, ctx.job.retry_policy, intent.streams, label=ctx.label, then=go_on,
            flushed_before=flushed_before,
        )  # fmt: skip
        return None

    def settle_streams(
        self, ctx: CommitContext, record: BatchRecord, replay: Sequence[StreamCommit]
    ) -> BatchRecord:
        """Flush all the intent's streams (again), and it is committed. Streams BigQuery no
        longer knows: written again if no flush was ever asked for (nothing of the batch
        can be visible), else nobody here can tell what is. A stream finalized or
        truncated under the sink (onceover_jobs.sink.wire.flush) stops the batch, named:
        the replay's tasks would vouch for the same stream, which still exists."""
        try:
            if record.commit_started_at is None:
                for stream in record.streams:
                    if not stream_exists(ctx.client, ctx.job.retry_policy, stream.stream):
                        raise StreamsGoneError(f"{ctx.label}: {stream.stream} no longer exists")
            record = ctx.commit_started(record)
            ctx.commit_dead_letters(record, resolving=True)
            self.publish(ctx, record)
        except StreamsGoneError as exc:
            if record.commit_started_at is not None:
                raise IntentUnresolvableError(ctx.unresolvable(record, exc)) from exc
            return ctx.write_again(record, exc, replay)
        settled = ctx.settled(record, commit_time=None)
        logger.warning("%s: flushed from the intent an earlier attempt left", ctx.label)
        return settled

    def aborted(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> str:
        return (
            "aborted before its flush: none of its rows are visible; a replay of this batch "
            "flushes the partitions it completed and writes the rest"
        )


def _in_intent(ledger: Ledger, task: TaskContextInfo) -> StreamCommit | None:
    """The stream the batch's intent names for this partition, if there is an intent."""
    record = ledger.batch(task.batch_id)
    if record is None:
        return None
    return next((s for s in record.streams if s.partition == task.partition), None)


def _now() -> float:
    return round(time.time(), 3)
