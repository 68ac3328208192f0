"""Stream rows as ingest changes them: plain Python objects, read and written with Core.

A batch of events names a few streams and moves each many times. As SQLModel rows
they were the dearest part of ingest: making one costs 25 instrumented attribute sets,
and the ORM's flush of the changed ones as much again (docs/journal/profiling.md, "Third
round"). Here a batch reads its streams with one query per run, changes
them in plain attributes, and writes the new ones with one ``INSERT`` and the changed
ones with one ``UPDATE``, each executed for every row.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, update
from sqlmodel import Session

from onceover_backend.tables import STREAM_COUNTERS, Stream

_TABLE = Stream.__table__  # type: ignore[attr-defined]
NAMES_PER_QUERY = 500  # bound parameters in one IN (...)
_LOAD = select(_TABLE).where(
    _TABLE.c.run_id == bindparam("run_id"), _TABLE.c.name.in_(bindparam("names", expanding=True))
)


def no_counts() -> dict[str, int]:
    """Every stream counter at zero, in the order of :data:`STREAM_COUNTERS`."""
    return dict.fromkeys(STREAM_COUNTERS, 0)


@dataclass(slots=True, eq=False)
class StreamRow:
    """One row of the ``stream`` table (:class:`onceover_backend.tables.Stream`)."""

    run_id: str
    name: str
    stream_type: str
    table_id: str
    query_id: str
    batch_id: int | None
    write: str | None
    partition: int
    task_attempt: int
    state: str
    created_at: datetime
    updated_at: datetime
    next_offset: int | None = None
    counts: dict[str, int] = field(default_factory=no_counts)
    """Its counter columns (:data:`STREAM_COUNTERS`), by name."""
    row_count: int | None = None
    last_error: str | None = None
    last_error_at: datetime | None = None
    id: int | None = None
    """None until stored."""
    stored: tuple[Any, ...] | None = None
    """Its changing columns as read (None: a new stream)."""

    def changing(self) -> tuple[Any, ...]:
        counts = self.counts
        return (
            *[getattr(self, name) for name in _CHANGING_COLUMNS],
            *[counts[name] for name in STREAM_COUNTERS],
        )


_COLUMNS = tuple(f.name for f in fields(StreamRow) if f.name not in ("id", "stored", "counts"))
"""Its columns but the id and the counters."""
_CHANGING_COLUMNS = (
    "state", "created_at", "updated_at", "next_offset", "row_count", "last_error",
    "last_error_at",
)  # fmt: skip
_CHANGING = (*_CHANGING_COLUMNS, *STREAM_COUNTERS)
"""What ingest changes of a stored stream, in the order of :meth:`StreamRow.changing`;
the rest is fixed when it is first stored."""
_UPDATE = (
    update(_TABLE)
    .where(_TABLE.c.id == bindparam("_id"))
    .values({name: bindparam(f"_{name}") for name in _CHANGING})
)


def load(session: Session, run_id: str, names: Iterable[str]) -> list[StreamRow]:
    """The stored streams of ``run_id`` among ``names``."""
    ordered = sorted(set(names))
    found: list[StreamRow] = []
    for start in range(0, len(ordered), NAMES_PER_QUERY):
        chunk = ordered[start : start + NAMES_PER_QUERY]
        for row in session.execute(_LOAD, {"run_id": run_id, "names": chunk}).mappings():
            stream = StreamRow(
                **{name: row[name] for name in _COLUMNS},
                counts={name: row[name] for name in STREAM_COUNTERS},
                id=row["id"],
            )
            stream.stored = stream.changing()
            found.append(stream)
    return found


def write(session: Session, streams: Iterable[StreamRow]) -> None:
    """Insert the new streams and update the changed ones (once: the batch's end)."""
    new: list[StreamRow] = []
    changed: list[dict[str, Any]] = []
    for stream in streams:
        if stream.stored is None:
            new.append(stream)
        elif (now := stream.changing()) != stream.stored:
            changed.append(
                {
                    "_id": stream.id,
                    **{f"_{name}": v for name, v in zip(_CHANGING, now, strict=True)},
                }
            )
            stream.stored = now
    if new:
        # In a fixed order, so concurrent first inserts of one run's streams wait on
        # each other rather than deadlock (the run's lock covers only stored runs).
        new.sort(key=lambda s: (s.run_id, s.name))
        session.execute(
            insert(_TABLE),
            [{**{name: getattr(s, name) for name in _COLUMNS}, **s.counts} for s in new],
        )
    if changed:
        changed.sort(key=lambda row: row["_id"])  # a fixed lock order on PostgreSQL
        session.execute(_UPDATE, changed)
