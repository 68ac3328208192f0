"""The streams one ingest touches: loaded once, made when first heard of, their events
applied in plain Python (:mod:`.stream_rows`) and written once at the end."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlmodel import Session

from onceover import events as ev
from onceover.modes import traits_of
from onceover_backend.services.ingest import rollups, stream_rows
from onceover_backend.services.ingest.rejections import rejections
from onceover_backend.services.ingest.rollups import Rollups, rollup_key
from onceover_backend.services.ingest.stream_rows import StreamRow
from onceover_backend.services.ingest.tallies import RunTally, StreamTally
from onceover_backend.services.ingest.times import minute

STREAM_RANK = {"created": 0, "appending": 1, "finalized": 2, "orphaned": 3, "committed": 4}


def count_append(
    tally: StreamTally,
    event: ev.AppendAcknowledged | ev.AppendAlreadyExists,
    time: datetime,
    counted: Rollups,
) -> None:
    """An append's answer, in its stream's tally and its rollup."""
    rows = event.rows
    at = tally.minute_of(time)
    counts = tally.counts
    if type(event) is ev.AppendAcknowledged:
        counts["appends"] += 1
        counts["rows"] += rows
        counts["bytes"] += event.bytes
        if event.offset is not None:
            tally.reach(event.offset + rows)
        rollups.count(counted, rollup_key(event, at, "OK"), rows, event.bytes)
    else:
        counts["already_exists"] += 1
        tally.reach(event.offset + rows)  # type: ignore[operator]  # never None here
        rollups.count(counted, rollup_key(event, at, "ALREADY_EXISTS"), rows, event.bytes)


def throttled_note(event: ev.AppendThrottled) -> str:
    return (
        f"throttled by BigQuery's throughput quota at offset {event.offset} (waiting up to "
        f"{event.wait_limit_s:.0f} s for it to refill): {event.message}"
    ).rstrip(": ")


def raise_state(stream: StreamRow, state: str) -> None:
    """States only move up a rank: a late ``stream_created`` never undoes ``committed``."""
    if STREAM_RANK[state] > STREAM_RANK[stream.state]:
        stream.state = state


@dataclass
class StreamProjection:
    """The streams of one ingest's events, by (run, stream name), with their tallies and
    the rows BigQuery refused on them (per run)."""

    session: Session
    counted: Rollups
    rows: dict[tuple[str, str], StreamRow] = field(default_factory=dict)
    tallies: dict[tuple[str, str], StreamTally] = field(default_factory=dict)
    rejected: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Per run: the samples of the rows BigQuery refused."""
    rejected_requests: dict[str, int] = field(default_factory=dict)
    """Per run: the ``rows_rejected`` events."""
    _not_stored: set[tuple[str, str]] = field(default_factory=set)

    def load(self, events: Iterable[ev.Event]) -> None:
        """Load every stored stream these events name, one query per run: a query per
        stream is a round trip each on PostgreSQL (docs/journal/profiling.md)."""
        names: dict[str, set[str]] = {}
        for event in events:
            if isinstance(event, ev.StreamEvent):
                names.setdefault(event.run_id, set()).add(event.stream)
            elif isinstance(event, ev.BatchCommitted):
                names.setdefault(event.run_id, set()).update(
                    s.stream for s in (*event.streams, *event.dead_letter_streams)
                )
            elif isinstance(event, ev.BatchSkippedDuplicate):
                names.setdefault(event.run_id, set()).update(event.orphaned_streams)
        for run_id, wanted in names.items():
            for stream in stream_rows.load(self.session, run_id, wanted):
                self.rows[(run_id, stream.name)] = stream
            self._not_stored.update(
                (run_id, name) for name in wanted if (run_id, name) not in self.rows
            )

    def get(self, run_id: str, name: str) -> StreamRow | None:
        """The stream, if this ingest or the database has it."""
        stream = self.rows.get((run_id, name))
        if stream is not None or (run_id, name) in self._not_stored:
            return stream
        found = stream_rows.load(self.session, run_id, [name])
        if not found:
            return None
        self.rows[(run_id, name)] = found[0]
        return found[0]

    def of_batch(
        self,
        event: ev.BatchCommitted,
        rows: ev.StreamRows,
        time: datetime,
        dead_letter_table: str | None = None,
    ) -> StreamRow:
        """A stream the batch committed: one of its table's, or with ``dead_letter_table``
        one of the PENDING streams holding the rows it set aside there."""
        stream = self.get(event.run_id, rows.stream)
        if stream is None:  # its executor's events have not arrived (or never will)
            # The type its mode writes on; the dead-letter table's streams are PENDING.
            stream = StreamRow(
                run_id=event.run_id,
                name=rows.stream,
                stream_type=(
                    "PENDING"
                    if dead_letter_table is not None
                    else traits_of(event.mode).stream_type
                ),
                table_id=dead_letter_table or event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                write=event.write,
                partition=rows.partition or 0,
                task_attempt=rows.attempt or 0,
                state="committed",
                created_at=time,
                updated_at=time,
            )
            self.rows[(event.run_id, rows.stream)] = stream
        if stream.row_count is None:
            stream.row_count = rows.rows
        return stream

    def apply(self, event: ev.StreamEvent, time: datetime, run: RunTally) -> None:
        """Apply one stream event of ``run``; ``time``: the event's, in UTC."""
        stream = self._stream(event, time)
        tally = self._tally(event, stream, time, run)
        if isinstance(event, ev.StreamCreated):
            return
        if isinstance(event, ev.StreamFinalized):
            stream.row_count = event.row_count
            raise_state(stream, "finalized")
            return
        if isinstance(event, ev.StreamOrphaned):
            raise_state(stream, "orphaned")
            self._note_error(stream, time, f"orphaned: {event.reason}")
            return
        raise_state(stream, "appending")
        tally.appending = True
        if isinstance(event, ev.RowsRejected):
            self._rows_rejected(stream, event, time)
            return
        if isinstance(event, ev.AppendFormatRefused):
            self._note_error(stream, time, f"Arrow rows refused, sent as proto: {event.message}")
            if run.run.arrow_refused_at is None:
                run.run.arrow_refused_at = time
                run.run.arrow_refused = event.message
            return
        if isinstance(event, ev.AppendThrottled):
            # Each refused try is an append_error (counted below); this says why they wait.
            self._note_error(stream, time, throttled_note(event))
            if run.run.throttled_at is None or time > run.run.throttled_at:
                run.run.throttled_at = time
            return
        if isinstance(event, ev.AppendAcknowledged | ev.AppendAlreadyExists):
            count_append(tally, event, time, self.counted)
        elif isinstance(event, ev.AppendOutOfRange):
            tally.counts["out_of_range"] += 1
            self._note_error(
                stream,
                time,
                f"OUT_OF_RANGE at offset {event.offset}: {event.message}".rstrip(": "),
            )
            key = rollup_key(event, minute(time), "OUT_OF_RANGE")
            rollups.count(self.counted, key, event.rows, 0)
        else:
            tally.counts["errors"] += 1
            where = f" at offset {event.offset}" if event.offset is not None else ""
            self._note_error(stream, time, f"{event.code}{where}: {event.message}".rstrip(": "))
            key = rollup_key(event, minute(time), event.code)
            rollups.count(self.counted, key, event.rows, 0)

    def write(self) -> None:
        """Write the tallies to their streams, and the streams that changed to the
        database (the runs they belong to must be stored)."""
        for tally in self.tallies.values():
            tally.write()
        stream_rows.write(self.session, self.rows.values())

    def _stream(self, event: ev.StreamEvent, time: datetime) -> StreamRow:
        stream = self.get(event.run_id, event.stream)
        if stream is None:
            stream = StreamRow(
                run_id=event.run_id,
                name=event.stream,
                stream_type=event.stream_type,
                table_id=event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                write=event.write,
                partition=event.partition,
                task_attempt=event.attempt,
                state="created",
                created_at=time,
                updated_at=time,
            )
            self.rows[(event.run_id, event.stream)] = stream
        return stream

    def _tally(
        self, event: ev.StreamEvent, stream: StreamRow, time: datetime, run: RunTally
    ) -> StreamTally:
        key = (event.run_id, event.stream)
        tally = self.tallies.get(key)
        if tally is None:
            tally = self.tallies[key] = StreamTally(time, time, stream, run)
        else:
            tally.note(time)
        return tally

    @staticmethod
    def _note_error(stream: StreamRow, time: datetime, text: str) -> None:
        if stream.last_error_at is None or time >= stream.last_error_at:
            stream.last_error = text
            stream.last_error_at = time

    def _rows_rejected(self, stream: StreamRow, event: ev.RowsRejected, time: datetime) -> None:
        """BigQuery refused rows of a request. Counted per run and kept as samples, not
        in the rollups: the request is sent again without them (or the task fails, and
        its append_error is counted there)."""
        run_id = event.run_id
        self.rejected_requests[run_id] = self.rejected_requests.get(run_id, 0) + 1
        self.rejected.setdefault(run_id, []).extend(rejections(event))
        where = (
            f"set aside in {event.dead_letter_table}"
            if event.dead_letter_table
            else "no dead-letter table: the task fails"
        )
        first = f": {event.samples[0].reason}" if event.samples else ""
        self._note_error(
            stream,
            time,
            f"{event.rows} row(s) rejected at offset {event.offset} ({where}){first}",
        )
