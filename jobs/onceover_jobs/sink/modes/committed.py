"""``committed``: rows visible per append. Each partition keeps a COMMITTED stream from
batch to batch (:mod:`onceover_jobs.sink.ledger.slots`); there is nothing to publish at
the end of a batch, so exactly-once across task retries rests on the ledger:

- the partition's stream and progress are recorded before its first append (invariant
  4), and each request before it goes out: a retried attempt finds the stream and goes
  on from the recorded offset;
- ALREADY_EXISTS is success only when the retried request covers exactly the rows the
  first try sent (invariant 7: each request's digest is recorded with its offset, and a
  retry's must match, or the task stops: its input changed between attempts);
- a batch write's streams are finalized once Spark took every task's result, their row
  counts checked, before the intent. A replay that finds the intent records it
  committed: its rows were visible as they were appended.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from onceover.ledger_files import StreamCommit
from onceover.modes import TRAITS
from onceover_jobs.sink.errors import LedgerError, NonDeterministicInputError, RowCountMismatchError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.ledger.records import Ledger, PartitionProgress
from onceover_jobs.sink.ledger.slots import StreamSlots
from onceover_jobs.sink.modes.base import CommitContext, VisibleAsAppended
from onceover_jobs.sink.wire.stream_calls import finalize_stream

if TYPE_CHECKING:
    import pyarrow as pa

    from onceover_jobs.sink.modes.staging import Stage, TaskContextInfo
    from onceover_jobs.sink.rows.dead_letter import RefusedRow
    from onceover_jobs.sink.wire.appender import PlannedAppend, StreamAppender

logger = logging.getLogger(__name__)


class CommittedMode(VisibleAsAppended):
    traits = TRAITS["committed"]

    def write(self, stage: Stage, batches: Iterator[pa.RecordBatch]) -> TaskResult:
        from onceover_jobs.sink.modes.staging import chained, encoder_for

        job, task, kind = stage.job, stage.task, self.traits.stream_type
        slots = StreamSlots(job.ledger())
        batch = stage.batch
        progress = slots.ledger.partition(task.batch_id, task.partition)
        resumed = progress is not None
        # Even a partition an earlier attempt recorded complete is read again: its input may
        # have ended early because something upstream failed, which a Python writer sees as
        # the end of its rows, and Spark then failed that attempt (see BufferedMode.write). The
        # recorded requests are checked and not sent again; rows beyond them are appended.
        if progress is None:
            first = next(batches, None)
            if first is None:  # an empty partition takes no stream
                return TaskResult(None, kind, 0, 0, task.partition, task.attempt)
            batches = chained(first, batches)
            progress, resumed = _take_stream(stage, slots, kind)
        events = stage.events(progress.stream, kind)
        events.created(resumed=resumed)
        encoder = encoder_for(job)
        record = _PartitionRecord(
            job.ledger(), task, replace(progress, attempt=task.attempt, complete=False)
        )
        start = progress.acked_rows
        base = progress.base
        earlier = record.refused_rows()
        refusals = replace(stage.refusals(encoder, events), recorded=record.refused)
        sent = _sent_before(progress)
        if sent is not None:
            # Cut again from the first row at the recorded boundaries, and checked: the
            # acknowledged rows are not sent again, the ones in flight are re-sent.
            start = 0
            recorded = tuple((offset, rows) for offset, (rows, _) in sorted(sent.items()))
        else:  # recorded before digests were kept: on from the acknowledged offset
            recorded = tuple((int(o), int(r)) for o, r in progress.inflight)
        appender = stage.appender(
            progress.stream,
            encoder=encoder,
            events=events,
            before_send=record.before_send,
            refusals=refusals,
            # The rows refused before the first row this attempt reads: those it reads
            # again, it takes out again itself (counted twice, every offset would be low).
            offset_shift=sum(1 for offset in earlier if offset < start),
        )
        try:
            rows = stage.append_all(
                appender, batches, encoder, offsets=True, start_row=start, recorded=recorded,
                sent=sent, acknowledged=progress.acked_rows, base=base, refusals=refusals,
                earlier=earlier,
            )  # fmt: skip
        except NonDeterministicInputError as exc:
            raise NonDeterministicInputError(_input_changed(stage, str(exc))) from exc
        finally:
            appender.close()
        total = start + rows
        if total < progress.acked_rows:
            raise NonDeterministicInputError(
                _input_changed(
                    stage,
                    f"this attempt has {total} rows, fewer than the {progress.acked_rows} an "
                    "earlier attempt wrote and BigQuery shows already",
                )
            )
        _check_stream_end(appender, base + total - len(record.progress.refused), stage)
        on_stream = record.complete(total)
        # Where the partition's next batch goes on (onceover_jobs.sink.ledger.slots).
        slots.finish(task.partition, progress.stream, batch, base + on_stream)
        dead_letters = stage.dead_letters(refusals)
        return TaskResult(
            progress.stream,
            kind,
            on_stream,
            appender.bytes_acknowledged,
            task.partition,
            task.attempt,
            base=base,
            dead_letters=dead_letters,
        )

    def prepare(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> None:
        """A batch write's COMMITTED streams are never continued (its write has one
        batch): finalized once Spark took every task's result, each row count checked
        against what the tasks reported, as pending mode's are. Finalizing again answers
        the same count, so a replay repeats it safely. A query's streams go on."""
        if ctx.batch_id is not None:
            return
        kind = self.traits.stream_type
        for stream in streams:
            row_count = finalize_stream(ctx.client, ctx.job.retry_policy, stream.stream)
            events = ctx.telemetry.stream(stream.stream, kind, stream.partition, stream.attempt)
            events.finalized(row_count)
            if row_count != stream.base + stream.rows:
                raise RowCountMismatchError(
                    f"{ctx.label}: stream {stream.stream} of partition {stream.partition} "
                    f"finalized with {row_count} rows, but its task reported "
                    f"{stream.base + stream.rows} written; nothing was recorded committed"
                )


def _take_stream(stage: Stage, slots: StreamSlots, kind: str) -> tuple[PartitionProgress, bool]:
    """The partition's stream for this batch, recorded before its first append
    (invariant 4): the stream an earlier batch left in the partition's slot, continued
    where it ended, or a new one. Returns the progress and whether the stream existed."""
    task = stage.task
    ledger = slots.ledger
    batch = stage.batch
    slot, continued = stage.continuable(slots, after_flush=False)
    if continued is not None:
        stream, base = continued
        if slot is None or slot.batch != batch:
            taken = slots.take(task.partition, stream, batch, base)
            stream, base = taken.stream, taken.base
    else:
        created = stage.create_stream(kind)
        taken = slots.take(task.partition, created, batch, 0)
        if taken.stream != created:  # a concurrent attempt of this batch took the slot
            stage.events(created, kind).orphaned(
                "another attempt of this partition took its stream slot first"
            )
        stream, base = taken.stream, taken.base
    proposed = PartitionProgress(stream=stream, attempt=task.attempt, base=base)
    progress = ledger.claim_partition(task.batch_id, task.partition, proposed)
    # A concurrent attempt that recorded first holds the partition: go on with its stream.
    return progress, continued is not None or progress != proposed


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


def _input_changed(stage: Stage, what: str) -> str:
    return (
        f"{stage.label}: {what}. The partition's input is not "
        "deterministic: it changed between attempts (a shuffle without a fixed order, a "
        "non-deterministic source or function, or another partitioning of the input), so "
        "rows already visible would mix with others. This attempt sent nothing. Make the "
        "input deterministic before the sink (df.repartition(n, key).sortWithinPartitions("
        "key), or df.cache() / df.checkpoint()), reconcile what the table holds, and run "
        "the write again under a new run id"
    )


def _check_stream_end(
    appender: StreamAppender,
    expected: int,
    stage: Stage,
) -> None:
    """The stream ends where the record says the partition's rows end (its rows but the
    refused ones): else an offset was worked out wrong and an ALREADY_EXISTS taken for
    rows that are not there, and the partition is not recorded complete."""
    if appender.end_offset is not None and appender.end_offset != expected:
        raise LedgerError(
            f"{stage.label}: the last request acknowledged on "
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
