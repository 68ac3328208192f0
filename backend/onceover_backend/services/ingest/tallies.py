"""What one ingest adds up for a run or a stream, in plain Python, before it is written
to the row once at the end (:meth:`~.projection.Projector.finish`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from onceover_backend.services.ingest.stream_rows import StreamRow, no_counts
from onceover_backend.services.ingest.times import minute
from onceover_backend.tables import Run


@dataclass
class Span:
    """The first and last time of one row's events in this batch."""

    first: datetime
    last: datetime

    def note(self, time: datetime) -> None:
        if time < self.first:
            self.first = time
        elif time > self.last:
            self.last = time


@dataclass
class RunTally(Span):
    """The times of one run's events in this batch, in plain Python; written to its row
    once, in :meth:`Projector.finish`. Setting an attribute of a SQLModel row goes through
    SQLAlchemy's instrumentation and then pydantic's ``__setattr__``; done per event, that
    was most of ingest's time (docs/journal/profiling.md)."""

    run: Run
    has_job: bool = False
    """The run's job is known: a later event's ``job`` has nothing to add."""

    def write(self) -> bool:
        """Write the times; whether an event came after the last one heard before."""
        run = self.run
        heard_later = run.last_event_at is not None and self.last > run.last_event_at
        if run.last_event_at is None or heard_later:
            run.last_event_at = self.last
        run.started_at = min(run.started_at, self.first)
        return heard_later


@dataclass
class StreamTally(Span):
    """What one stream's append outcomes add up to in this batch (counters, the highest
    offset, first and last times); written to its row once, like :class:`RunTally`."""

    stream: StreamRow
    run: RunTally
    appending: bool = False
    """The stream's state is at least ``appending``: append outcomes take the fast path."""
    counts: dict[str, int] = field(default_factory=no_counts)
    """What this batch adds to each of the stream's counters (:data:`STREAM_COUNTERS`)."""
    next_offset: int | None = None
    _minute: datetime | None = None
    _minute_end: datetime | None = None

    def minute_of(self, time: datetime) -> datetime:
        """The minute ``time`` falls in; a stream's appends come seconds apart, so the
        last one's minute is kept (``replace`` costs more than two comparisons)."""
        if self._minute is None or not self._minute <= time < self._minute_end:  # type: ignore[operator]
            self._minute = minute(time)
            self._minute_end = self._minute + timedelta(minutes=1)
        return self._minute

    def reach(self, offset: int) -> None:
        self.next_offset = offset if self.next_offset is None else max(self.next_offset, offset)

    def write(self) -> None:
        stream = self.stream
        stream.created_at = min(stream.created_at, self.first)
        stream.updated_at = max(stream.updated_at, self.last)
        counts = stream.counts
        for name, added in self.counts.items():
            if added:
                counts[name] += added
        if self.next_offset is not None:
            reached = max(stream.next_offset or 0, self.next_offset)
            if reached != stream.next_offset:
                stream.next_offset = reached
