"""The driver's batch events, for the control plane: a batch's intent, its commit, a
replay skipped as a duplicate, an abort, an overwrite's swap. Ids are derived from the
facts, so an event sent twice is stored once; the write's table and place keep apart the
writes of one foreachBatch call or run.

Events are built only for someone to hear them: without a monitor, the commit imports
neither the event schema nor pydantic (onceover.events).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from onceover.ledger_files import BatchRecord, StreamCommit, SwapRecord
from onceover_jobs.sink.reporting.telemetry import DRIVER_EVENT_FLUSH_S, Telemetry

if TYPE_CHECKING:
    from onceover.events import StreamRows


class BatchEvents:
    """The events of one batch of one write, sent through ``telemetry``."""

    def __init__(self, telemetry: Telemetry) -> None:
        self.telemetry = telemetry

    def intent(self, intent: BatchRecord) -> None:
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.BatchIntent(
                id=self._id("batch_intent", *(s.stream for s in intent.streams)),
                streams=_stream_rows(intent.streams),
                expected_rows=intent.expected_rows,
                upserts=intent.upserts,
                deletes=intent.deletes,
                **_dead_letter_fields(intent),
                **self.telemetry.batch_event_fields(),
            )
        )

    def committed(self, record: BatchRecord, duration_ms: float | None) -> None:
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.BatchCommitted(
                id=self._id("batch_committed"),
                streams=_stream_rows(record.streams),
                rows=record.expected_rows,
                duration_ms=duration_ms,
                resolved=record.resolved,
                # BigQuery's time where it gives one (pending), else the driver's.
                commit_time=record.commit_time or record.committed_at,
                source_offsets=None if record.offsets is None else list(record.offsets),
                key_checksum=record.key_checksum,
                key_buckets=None if record.key_buckets is None else list(record.key_buckets),
                upserts=record.upserts,
                deletes=record.deletes,
                **_dead_letter_fields(record),
                **self.telemetry.batch_event_fields(),
            )
        )

    def skipped_duplicate(self, replay: Sequence[StreamCommit], *, orphaned: bool) -> None:
        """A replay of a committed batch wrote ``replay``; ``orphaned``: nobody will ever
        see those streams."""
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.BatchSkippedDuplicate(
                id=self._id("batch_skipped_duplicate", *(s.stream for s in replay)),
                rows=sum(s.rows for s in replay),
                orphaned_streams=[s.stream for s in replay] if orphaned else [],
                **self.telemetry.batch_event_fields(),
            )
        )

    def aborted(self, streams: Sequence[StreamCommit], reason: str) -> None:
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.BatchAborted(
                id=self._id("batch_aborted", *(s.stream for s in streams)),
                streams=_stream_rows(streams),
                reason=reason,
                **self.telemetry.batch_event_fields(),
            )
        )

    def swap_started(self, swap: SwapRecord) -> None:
        """An overwrite's swap is recorded and about to be asked for; heard before the
        driver asks, so a crash while the job runs shows the step it stopped at."""
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.OverwriteSwapStarted(
                id=self._id("overwrite_swap_started", swap.job_id),
                **_swap_fields(swap),
                **self.telemetry.batch_event_fields(),
            )
        )
        self.telemetry.flush(DRIVER_EVENT_FLUSH_S)

    def swapped(self, swap: SwapRecord) -> None:
        """An overwrite's swap is done and recorded so."""
        if not self.telemetry.enabled:
            return
        from onceover import events

        self.telemetry.emit(
            events.OverwriteSwapped(
                id=self._id("overwrite_swapped", swap.job_id),
                swapped_at=swap.swapped_at,
                **_swap_fields(swap),
                **self.telemetry.batch_event_fields(),
            )
        )
        self.telemetry.flush(DRIVER_EVENT_FLUSH_S)

    def _id(self, kind: str, *facts: str) -> str:
        """Derived from the facts, so a repeated event is stored once; the write's table
        and place keep apart the writes of one foreachBatch call or run."""
        from onceover.events import event_id

        return event_id(
            self.telemetry.job.run_id,
            kind,
            self.telemetry.job.query_id,
            self.telemetry.batch_id,
            *self.telemetry.write_facts(),
            *facts,
        )


def _stream_rows(streams: Sequence[StreamCommit]) -> list[StreamRows]:
    from onceover.events import StreamRows

    return [
        StreamRows(
            stream=s.stream, rows=s.rows, bytes=s.bytes, partition=s.partition, attempt=s.attempt
        )
        for s in streams
    ]


def _dead_letter_fields(record: BatchRecord) -> dict[str, Any]:
    """A batch event's account of the rows it set aside."""
    return {
        "dead_lettered_rows": record.dead_lettered_rows,
        "dead_letter_table": record.dead_letter_table,
        "dead_letter_streams": _stream_rows(record.dead_letter_streams),
    }


def _swap_fields(swap: SwapRecord) -> dict[str, Any]:
    """A swap event's account of the swap, from its ledger record."""
    return {
        "staging": swap.staging,
        "scope": swap.scope[:300],
        "job_id": swap.job_id,
        "attempt": swap.attempt,
        "staged_rows": swap.staged_rows,
        "rows_replaced": swap.rows_replaced,
        "partitions": swap.partitions,
        "partition_count": swap.partition_count,
    }
