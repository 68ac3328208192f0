"""The event table's rows: each event id stored once, at the driver's own speed.

Ingest writes a row per event, so the statements here go to the driver as they are,
with their values already in the column's form: SQLAlchemy's ORM and type processing
cost more per row than the database's insert (docs/journal/profiling.md).

* **SQLite.** Ingest holds the database's write lock (``BEGIN IMMEDIATE``), so the ids
  already stored are read first and only the others inserted.
* **PostgreSQL.** ``COPY`` into a temporary table, then one ``INSERT ... SELECT ... ON
  CONFLICT (id) DO NOTHING RETURNING id``: a transaction inserting an id another one
  inserts at the same time waits for it, then skips the id, so an event is stored and
  counted once however many posts carry it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.exc import DBAPIError
from sqlmodel import Session

from onceover import events as ev

_COLUMNS = "id, type, run_id, table_id, time, received_at, body"
_IDS_PER_QUERY = 500  # bound parameters in one IN (...)

# Rows come in by COPY, the fastest way in (a multi-row INSERT or unnest() of arrays
# cost 3-8 times as much in the client), into a temporary table of the session's,
# emptied at each commit; one INSERT moves the new ones over.
_PG_INCOMING = (
    "CREATE TEMPORARY TABLE IF NOT EXISTS event_incoming (id text, type text, "
    "run_id text, table_id text, time timestamptz, body text) ON COMMIT DELETE ROWS"
)
_PG_COPY = "COPY event_incoming (id, type, run_id, table_id, time, body) FROM STDIN"
_PG_MOVE = (
    f"INSERT INTO event ({_COLUMNS}) "
    "SELECT id, type, run_id, table_id, time, %s, body::json FROM event_incoming "
    "ON CONFLICT (id) DO NOTHING RETURNING id"
)
_SQLITE_INSERT = f"INSERT INTO event ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"


def sqlite_time(time: datetime) -> str:
    """``time`` as SQLAlchemy's SQLite ``DATETIME`` stores a :class:`UTCDateTime`:
    in UTC, ``YYYY-MM-DD HH:MM:SS.ffffff``, so reads and comparisons see one format."""
    if time.tzinfo is not UTC:
        time = time.astimezone(UTC)
    # Formatted by hand, once an event: isoformat(" ", "microseconds") formats the
    # zone's offset too, to be cut off after, and cost more (docs/journal/profiling.md).
    return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (  # noqa: UP031 - the fastest here
        time.year, time.month, time.day, time.hour, time.minute, time.second,
        time.microsecond,
    )  # fmt: skip


def store_new(
    session: Session,
    events: Sequence[ev.Event],
    times: Sequence[datetime],
    bodies: Sequence[str],
    received_at: datetime,
) -> list[int]:
    """Insert the events whose ids are not stored yet (``events`` hold each id once);
    the indexes, in ``events``, of those inserted. ``times`` are the events' times in
    UTC and ``bodies`` their JSON text, stored as they are."""
    if not events:
        return []
    connection = session.connection()
    if connection.dialect.name == "postgresql":
        dbapi = connection.dialect.loaded_dbapi
        driver = connection.connection.driver_connection
        try:
            with driver.cursor() as cursor:  # type: ignore[union-attr]
                cursor.execute(_PG_INCOMING)
                with cursor.copy(_PG_COPY) as copy:
                    for event, time, body in zip(events, times, bodies, strict=True):
                        copy.write_row(
                            (event.id, event.type, event.run_id, event.table, time, body)
                        )
                cursor.execute(_PG_MOVE, (received_at,))
                inserted = {row[0] for row in cursor.fetchall()}
        except dbapi.Error as exc:
            # As SQLAlchemy raises it (a deadlock: OperationalError), so ingest retries.
            raise DBAPIError.instance(_PG_MOVE, None, exc, dbapi.Error) from exc
        return [index for index, event in enumerate(events) if event.id in inserted]
    known: set[str] = set()
    ids = [event.id for event in events]
    for start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = ids[start : start + _IDS_PER_QUERY]
        marks = ", ".join("?" * len(chunk))
        query = f"SELECT id FROM event WHERE id IN ({marks})"
        known.update(row[0] for row in connection.exec_driver_sql(query, tuple(chunk)))
    new = [index for index, event in enumerate(events) if event.id not in known]
    if new:
        received = sqlite_time(received_at)
        connection.exec_driver_sql(
            _SQLITE_INSERT,
            [
                (
                    events[index].id,
                    events[index].type,
                    events[index].run_id,
                    events[index].table,
                    sqlite_time(times[index]),
                    received,
                    bodies[index],
                )
                for index in new
            ],
        )
    return new
