"""Event times as the projection compares them: in UTC, the earliest start and the
latest end kept whatever arrived first."""

from __future__ import annotations

from datetime import UTC, datetime


def in_utc(time: datetime) -> datetime:
    """``time`` with the standard library's UTC as its zone. pydantic gives each parsed
    time a zone object of its own, and comparing or hashing two such times calls both
    zones' ``utcoffset``, which made sorting a batch by time many times dearer than in
    UTC (docs/journal/profiling.md, "Third round")."""
    return time.astimezone(UTC)


def later(current: datetime | None, new: datetime) -> datetime:
    return new if current is None or new > current else current


def earlier(current: datetime | None, new: datetime) -> datetime:
    return new if current is None or new < current else current


def minute(time: datetime) -> datetime:
    return time.replace(second=0, microsecond=0)
