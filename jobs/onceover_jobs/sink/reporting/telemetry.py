"""Turns what the sink does into events (onceover.events) and hands them to the emitter.

Ids are derived from the facts (run, stream, offset, how many times it was sent), so
an event posted twice is stored once. Telemetry never raises into the write path.

Without a monitor (no ``monitor.url``) nothing is built: no event, and no import of the
event schema and pydantic, which a fresh commit worker would otherwise pay for events
no one hears (docs/journal/profiling.md).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import WriteIdentity
from onceover_jobs.sink.wire.appender import PlannedAppend

if TYPE_CHECKING:
    from onceover_jobs.sink.rows.dead_letter import RefusedRow

logger = logging.getLogger(__name__)

TASK_EVENT_FLUSH_S = 1.0
"""How long a finishing task waits for its events; the rest is spooled."""
DRIVER_EVENT_FLUSH_S = 2.0
"""How long the driver waits for a batch's (or a run's) events after a commit or abort;
the rest is spooled."""


def _emitter(job: SinkJob) -> Any:
    from onceover_jobs.outbox import NullEmitter, emitter_for

    if job.options.monitor_url is None:
        return NullEmitter()
    return emitter_for(job.options.monitor_url, job.options.monitor_token)


class Telemetry:
    """Events of one batch (driver) or one task (executor)."""

    def __init__(self, job: SinkJob, batch_id: int | None) -> None:
        self.job = job
        self.batch_id = batch_id
        self.emitter = _emitter(job)

    @property
    def enabled(self) -> bool:
        """Whether anyone hears the events: else build none."""
        from onceover_jobs.outbox import NullEmitter

        return not isinstance(self.emitter, NullEmitter)

    def common(self) -> dict[str, Any]:
        return {
            "time": datetime.now(UTC),
            "run_id": self.job.run_id,
            "table": self.job.table,
            "job": self.job.options.job,
        }

    def batch_fields(self) -> dict[str, Any]:
        return {
            **self.common(),
            "mode": self.job.options.mode,
            "query_id": self.job.query_id,
            "batch_id": self.batch_id,
            "write": self.write_place(),
        }

    def batch_event_fields(self) -> dict[str, Any]:
        """What every batch event carries: the batch, and how reconciliation counts it."""
        return {
            **self.batch_fields(),
            "key": self.job.options.key,
            "stamped": self.job.options.stamp,
        }

    def emit(self, event: Any) -> None:
        try:
            self.emitter.emit(event)
        except Exception:  # monitoring must never break a write
            logger.exception("could not queue event %s", getattr(event, "type", "?"))

    def flush(self, timeout_s: float) -> None:
        """What was emitted delivered, or spooled, before the write goes on: waiting for
        the control plane only while it answers promptly (its slowness is not the
        write's)."""
        from onceover_jobs.outbox import WRITE_PATH_PATIENCE_S

        try:
            self.emitter.flush(timeout_s, patience_s=WRITE_PATH_PATIENCE_S)
        except Exception:
            logger.exception("could not flush events")

    def write_place(self) -> str | None:
        """Which of the call's (or run's) writes to the table this is; None for the
        streaming sink, whose micro-batch is its write."""
        write = self.job.write
        if not isinstance(write, WriteIdentity) or write.kind == "streaming":
            return None
        return write.write

    def write_facts(self) -> tuple[str, ...]:
        """What keeps the event ids of one foreachBatch call's (or one run's) writes
        apart: the write's table and place; nothing for the streaming sink."""
        place = self.write_place()
        return () if place is None else (self.job.table, place)

    def batch_id_text(self) -> str:
        return "write" if self.batch_id is None else str(self.batch_id)

    def stream(self, stream: str, stream_type: str, partition: int, attempt: int) -> StreamEvents:
        if not self.enabled:
            return SILENT
        return StreamTelemetry(self, stream, stream_type, partition, attempt)


class StreamTelemetry:
    """Events of one stream, written by one task attempt; also the appender's listener."""

    def __init__(
        self, parent: Telemetry, stream: str, stream_type: str, partition: int, attempt: int
    ) -> None:
        self.parent = parent
        self.stream_name = stream
        self.fields = {
            "stream": stream,
            "stream_type": stream_type,
            "partition": partition,
            "attempt": attempt,
        }
        self._sequence = 0

    def _base(self) -> dict[str, Any]:
        return {**self.parent.batch_fields(), **self.fields}

    def _id(self, kind: str, *facts: object) -> str:
        from onceover.events import event_id

        # Tasks of one batch share the _default stream (and a committed-mode stream is
        # shared by a partition's attempts): the task's coordinates keep ids apart.
        f = self.fields
        return event_id(
            self.parent.job.run_id,
            kind,
            self.stream_name,
            self.parent.batch_id,
            *self.parent.write_facts(),
            f["partition"],
            f["attempt"],
            *facts,
        )

    def _next(self) -> int:
        self._sequence += 1
        return self._sequence

    def created(self, *, resumed: bool = False) -> None:
        from onceover import events

        attempt = self.fields["attempt"]
        self.parent.emit(
            events.StreamCreated(
                id=self._id("stream_created", attempt), resumed=resumed, **self._base()
            )
        )

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None:
        from onceover import events

        # The _default stream has no offsets: its requests are told apart by sequence.
        fact = append.offset if append.offset is not None else f"seq{self._next()}"
        self.parent.emit(
            events.AppendAcknowledged(
                id=self._id("append_acknowledged", fact, self.fields["attempt"]),
                offset=append.offset,
                rows=append.rows,
                bytes=append.bytes,
                latency_ms=latency_ms,
                **self._base(),
            )
        )

    def already_exists(self, append: PlannedAppend) -> None:
        from onceover import events

        assert append.offset is not None
        self.parent.emit(
            events.AppendAlreadyExists(
                id=self._id(
                    "append_already_exists", append.offset, append.sends, self.fields["attempt"]
                ),
                offset=append.offset,
                rows=append.rows,
                bytes=append.bytes,
                **self._base(),
            )
        )

    def out_of_range(self, append: PlannedAppend, message: str) -> None:
        from onceover import events

        assert append.offset is not None
        self.parent.emit(
            events.AppendOutOfRange(
                id=self._id(
                    "append_out_of_range", append.offset, append.sends, self.fields["attempt"]
                ),
                offset=append.offset,
                rows=append.rows,
                message=message[:4000],
                **self._base(),
            )
        )

    def error(self, append: PlannedAppend | None, code: str, message: str, retrying: bool) -> None:
        from onceover import events

        self.parent.emit(
            events.AppendError(
                id=self._id("append_error", self._next(), self.fields["attempt"], code),
                code=code,
                offset=None if append is None else append.offset,
                rows=0 if append is None else append.rows,
                message=message[:4000],
                retrying=retrying,
                **self._base(),
            )
        )

    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        from onceover import events

        self.parent.emit(
            events.AppendThrottled(
                id=self._id("append_throttled", self._next(), self.fields["attempt"]),
                offset=append.offset,
                rows=append.rows,
                message=message[:4000],
                wait_limit_s=limit_s,
                **self._base(),
            )
        )

    def format_refused(self, refusal: str) -> None:
        """BigQuery refused this stream's Arrow rows: the job goes on as proto rows
        (onceover_jobs.sink.modes.row_format)."""
        from onceover import events

        self.parent.emit(
            events.AppendFormatRefused(
                id=self._id("append_format_refused", self.fields["attempt"]),
                refused="arrow",
                sent_as="proto",
                message=refusal[:4000],
                **self._base(),
            )
        )

    def rows_rejected(self, append: PlannedAppend, rows: list[RefusedRow]) -> None:
        """BigQuery refused ``rows`` of ``append`` (onceover_jobs.sink.rows.dead_letter)."""
        from onceover import events

        try:
            event = events.RowsRejected(
                id=self._id("rows_rejected", append.offset, append.digest, self.fields["attempt"]),
                offset=append.offset or 0,
                rows=len(rows),
                dead_letter_table=self.parent.job.options.dead_letter,
                samples=[
                    events.RowRejection(
                        offset=row.offset,
                        key=None if row.key is None else row.key[:1000],
                        column=row.column,
                        reason=row.reason[:1000],
                    )
                    for row in rows[: events.ROW_REJECTION_SAMPLES]
                ],
                **self._base(),
            )
        except ValueError:  # a name the schema refuses: the error still names the rows
            logger.warning("rows_rejected event not sent", exc_info=True)
            return
        self.parent.emit(event)

    def finalized(self, row_count: int) -> None:
        from onceover import events

        self.parent.emit(
            events.StreamFinalized(
                id=self._id("stream_finalized"), row_count=row_count, **self._base()
            )
        )

    def orphaned(self, reason: str, rows: int = 0) -> None:
        from onceover import events

        self.parent.emit(
            events.StreamOrphaned(
                id=self._id("stream_orphaned"), reason=reason[:4000], rows=rows, **self._base()
            )
        )


class _Quiet:
    """A listener that tells no one: the dead-letter stream's appends (the batch's
    events name that stream and its rows)."""

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None:
        pass

    def already_exists(self, append: PlannedAppend) -> None:
        pass

    def out_of_range(self, append: PlannedAppend, message: str) -> None:
        pass

    def error(self, append: PlannedAppend | None, code: str, message: str, retrying: bool) -> None:
        pass

    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        pass


QUIET = _Quiet()


class _Silent(_Quiet):
    """A stream's telemetry when no one hears it (no monitor): builds no event."""

    def created(self, *, resumed: bool = False) -> None:
        pass

    def rows_rejected(self, append: PlannedAppend, rows: list[RefusedRow]) -> None:
        pass

    def finalized(self, row_count: int) -> None:
        pass

    def orphaned(self, reason: str, rows: int = 0) -> None:
        pass

    def format_refused(self, refusal: str) -> None:
        pass


SILENT = _Silent()

StreamEvents: TypeAlias = StreamTelemetry | _Silent
"""What :meth:`Telemetry.stream` gives: a stream's events, or silence without a monitor."""
