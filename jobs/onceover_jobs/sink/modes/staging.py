"""What every mode's task does with a stream, on an executor: create it (paced), append a
partition's requests to it with offsets under the cap, set aside the rows BigQuery
refuses, finalize and check.

A :class:`Stage` is one task attempt's partition of one batch: the job, the client, the
task and its events. A mode's :meth:`~onceover_jobs.sink.modes.base.WriteMode.write`
decides which stream the partition goes on and from which offset; the stage does the
rest the same way in every mode. This module imports pyarrow: only tasks import it
(:meth:`~onceover_jobs.sink.modes.base.WriteMode.write_partition`), never the driver's
commit worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from onceover.ledger_files import batch_name
from onceover_jobs.sink.errors import NonDeterministicInputError, RowCountMismatchError
from onceover_jobs.sink.job.results import DeadLetters
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import SparkCall
from onceover_jobs.sink.ledger.slots import StreamSlot, StreamSlots, continuation
from onceover_jobs.sink.reporting.telemetry import QUIET, StreamEvents, Telemetry
from onceover_jobs.sink.rows.dead_letter import (
    RequestRows,
    RowRefusals,
    column_paths,
    dead_letter_batch,
    dead_letter_schema,
)
from onceover_jobs.sink.wire.appender import AppendListener, PlannedAppend, StreamAppender
from onceover_jobs.sink.wire.requests import ArrowEncoder, RowEncoder, plan_requests
from onceover_jobs.sink.wire.schema_lag import SchemaCatchUp
from onceover_jobs.sink.wire.stream_calls import finalize_stream, stream_exists
from onceover_jobs.sink.wire.stream_rate import stream_creations
from onceover_jobs.sink.wire.unary import call_with_retry

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.write_api import WriteApi

logger = logging.getLogger(__name__)

STREAM_CHECK_IDLE_S = 600.0
"""A slot's stream unused this long is looked up before it is continued: BigQuery deletes
a COMMITTED stream idle for 3 days (BUFFERED: 7), and a query may have stood still that
long."""


@dataclass(frozen=True)
class TaskContextInfo:
    """Which task attempt this is: Spark's partition and attempt numbers, the micro-batch
    (None for a batch write outside foreachBatch) and what Spark's local properties say
    of the call (:class:`~onceover_jobs.sink.ledger.identity.SparkCall`)."""

    partition: int
    attempt: int
    batch_id: int | None
    call: SparkCall = field(default_factory=SparkCall)


def encoder_for(job: SinkJob) -> RowEncoder:
    """The row encoder of the job's row format (``row_format``, or proto once BigQuery
    refused Arrow: onceover_jobs.sink.modes.row_format): Arrow, or proto rows; DATETIME text
    parsed on the way (onceover_jobs.sink.rows.datetime_text); its connections asking
    for the columns' defaults with ``missingValue=default``
    (onceover_jobs.sink.rows.missing_values); a change data capture write's rows with
    their pseudo-columns (onceover_jobs.sink.rows.change_capture)."""
    from onceover_jobs.sink.modes.row_format import row_format_of
    from onceover_jobs.sink.rows.datetime_text import sent_schema, with_datetime_text
    from onceover_jobs.sink.rows.missing_values import with_defaults

    planned = job.plan.arrow_schema
    fields: Callable[[], Sequence[Any]] = job.schema_fields
    if job.change_capture is not None:  # the pseudo-columns behind the table's
        from onceover_jobs.sink.rows.change_capture import pseudo_schema_fields
        from onceover_jobs.sink.rows.change_rows import with_pseudo

        planned = with_pseudo(planned)
        fields = lambda: [*job.schema_fields(), *pseudo_schema_fields()]  # noqa: E731
    inner = row_encoder(row_format_of(job), fields, sent_schema(planned))
    return with_defaults(with_datetime_text(inner, planned), job.options.missing_value)


def row_encoder(
    row_format: str, fields: Callable[[], Sequence[Any]], arrow_schema: pa.Schema
) -> RowEncoder:
    """The encoder of ``row_format`` for rows of ``arrow_schema`` into a table of
    ``fields`` (asked for only by proto rows): every stream of a job, the dead-letter
    table's too, sends rows one way, since a project that refuses Arrow refuses it on
    every table."""
    if row_format == "proto":
        from onceover_jobs.sink.rows.proto_encoder import ProtoEncoder

        return ProtoEncoder(fields(), arrow_schema)
    return ArrowEncoder(arrow_schema)


def chained(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``first`` (read to see whether the partition has rows), then the rest."""
    yield first
    yield from rest


class _FirstArrowAck:
    """A stream's listener that tells the process BigQuery takes the job's Arrow rows
    (onceover_jobs.sink.modes.row_format) at the first acknowledgement, then just passes on."""

    def __init__(self, inner: AppendListener, job: SinkJob) -> None:
        self._inner = inner
        self._job = job

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None:
        from onceover_jobs.sink.modes.row_format import arrow_accepted

        arrow_accepted(self._job)
        self._inner.acknowledged(append, latency_ms)

    def already_exists(self, append: PlannedAppend) -> None:
        self._inner.already_exists(append)

    def out_of_range(self, append: PlannedAppend, message: str) -> None:
        self._inner.out_of_range(append, message)

    def error(self, append: PlannedAppend | None, code: str, message: str, retrying: bool) -> None:
        self._inner.error(append, code, message, retrying)

    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        self._inner.throttled(append, message, limit_s)


class Stage:
    """One task attempt's partition of one batch, as every mode writes it."""

    def __init__(
        self, job: SinkJob, client: WriteApi, task: TaskContextInfo, telemetry: Telemetry
    ) -> None:
        self.job = job
        self.client = client
        self.task = task
        self.telemetry = telemetry

    @property
    def label(self) -> str:
        """The partition as messages name it."""
        return (
            f"{self.job.table} batch {self.telemetry.batch_id_text()} partition "
            f"{self.task.partition} attempt {self.task.attempt}"
        )

    @property
    def batch(self) -> str:
        """The batch as the ledger names it."""
        return batch_name(self.task.batch_id)

    def events(self, stream: str, stream_type: str) -> StreamEvents:
        """The events of this attempt on ``stream``."""
        return self.telemetry.stream(stream, stream_type, self.task.partition, self.task.attempt)

    def create_stream(self, kind: str, *, parent: str | None = None) -> str:
        """A new PENDING, BUFFERED or COMMITTED stream on the job's table (or ``parent``);
        returns its name."""
        on = parent or self.job.parent
        client = self.client

        def create(timeout: float) -> str:
            stream_creations().take()  # every try counts against the quota: pace each
            return client.create_write_stream(on, kind, timeout=timeout).name

        return call_with_retry(self.job.retry_policy, create, what="CreateWriteStream", on=on)

    def stream_exists(self, stream: str) -> bool:
        return stream_exists(self.client, self.job.retry_policy, stream)

    def finalize(self, stream: str) -> int:
        """Finalize ``stream``; returns its row count."""
        return finalize_stream(self.client, self.job.retry_policy, stream)

    def appender(
        self,
        stream: str,
        *,
        encoder: RowEncoder,
        events: StreamEvents,
        before_send: Callable[[PlannedAppend, list[PlannedAppend]], None] | None = None,
        refusals: RowRefusals | None = None,
        offset_shift: int = 0,
    ) -> StreamAppender:
        from onceover_jobs.sink.modes.row_format import arrow_settled, row_format_of

        arrow = row_format_of(self.job) == "arrow"
        listener: AppendListener = events
        if arrow and not arrow_settled(self.job):
            listener = _FirstArrowAck(events, self.job)
        return StreamAppender(
            self.client,
            stream,
            schema_payload=encoder.schema_payload,
            listener=listener,
            context=self.label,
            policy=self.job.retry_policy,
            max_inflight=self.job.options.max_inflight,
            before_send=before_send,
            on_row_errors=refusals,
            offset_shift=offset_shift,
            arrow=arrow,
            # A column this write (or another) just added may not be seen yet by the
            # Storage Write API: its refusal is waited for (wire.schema_lag).
            schema_catch_up=SchemaCatchUp.of(column_paths(self.job.table_fields)),
        )

    def refusals(self, encoder: RowEncoder, events: StreamEvents) -> RowRefusals:
        """What the task does with rows BigQuery refuses (onceover_jobs.sink.rows.dead_letter)."""
        job = self.job
        return RowRefusals(
            table=job.table,
            partition=self.task.partition,
            key=job.options.key,
            columns=column_paths(job.table_fields),
            encoder=encoder,
            dead_letter_table=job.options.dead_letter,
            reported=events.rows_rejected,
        )

    def append_all(
        self,
        appender: StreamAppender,
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
            self.job.options.max_request_bytes,
            start_row=start_row,
            recorded=recorded,
            table=self.job.table,
        ):
            encoded = request.encoded
            before = sent.get(request.offset) if sent is not None else None
            if before is not None and before != (encoded.rows, encoded.digest):
                raise NonDeterministicInputError(
                    f"the rows at offsets {request.offset}..{request.offset + before[0] - 1} "
                    "are not those an earlier attempt of this partition sent there (their "
                    "digests differ)"
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

    def dead_letters(self, refusals: RowRefusals) -> DeadLetters | None:
        """The refused rows on a PENDING stream of the dead-letter table, finalized and
        checked, for the driver to commit with the batch; None when no row was refused.
        A failed attempt's stream is never committed (the driver commits only what tasks
        return), as its target stream is not."""
        if not refusals.refused:
            return None
        job = self.job
        assert job.options.dead_letter is not None
        rows = dead_letter_batch(
            refusals.refused,
            run_id=job.run_id,
            query_id=job.query_id,
            batch_id=self.task.batch_id,
            write=self.telemetry.write_place(),
            table=job.table,
        )
        parent = job.dead_letter_parent
        assert parent is not None
        stream = self.create_stream("PENDING", parent=parent)
        from onceover_jobs.sink.modes.row_format import row_format_of

        arrow = row_format_of(job) == "arrow"
        encoder = row_encoder(row_format_of(job), dead_letter_schema, rows.schema)
        appender = StreamAppender(
            self.client,
            stream,
            schema_payload=encoder.schema_payload,
            listener=QUIET,
            context=f"{self.label} (dead letters)",
            policy=job.retry_policy,
            max_inflight=job.options.max_inflight,
            arrow=arrow,
        )
        try:
            sent = self.append_all(appender, [rows], encoder, offsets=True)
        finally:
            appender.close()
        row_count = self.finalize(stream)
        if row_count != sent:
            raise RowCountMismatchError(
                f"{self.label}: dead-letter stream {stream} finalized with {row_count} rows "
                f"but {sent} were appended"
            )
        logger.warning(
            "%s: %d rows BigQuery refused set aside for %s",
            self.label,
            sent,
            job.options.dead_letter,
        )
        return DeadLetters(
            stream, sent, appender.bytes_acknowledged, keys=tuple(r.key for r in refusals.refused),
            finalized_at=datetime.now(UTC).isoformat(),
        )  # fmt: skip

    def continuable(
        self, slots: StreamSlots, *, after_flush: bool
    ) -> tuple[StreamSlot | None, tuple[str, int] | None]:
        """The partition's slot (read once) and where this batch may continue its stream
        (:func:`~onceover_jobs.sink.ledger.slots.continuation`), None when it must take a
        new one. A stream unused for :data:`STREAM_CHECK_IDLE_S` is looked up first:
        BigQuery may have deleted it while the query stood still."""
        slot = slots.current(self.task.partition)
        continued = continuation(slot, self.batch, after_flush=after_flush)
        if (
            continued is not None
            and slot is not None
            and time.time() - slot.taken_at > STREAM_CHECK_IDLE_S
            and not self.stream_exists(slot.stream)
        ):
            logger.info("stream %s is gone (expired while unused); taking a new one", slot.stream)
            return slot, None
        return slot, continued
