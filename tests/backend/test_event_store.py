"""The event table's rows as ingest writes them past SQLAlchemy's ORM: the same values
the ORM would store, each id once, the body as given."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from onceover_backend.core.db import write_transaction
from onceover_backend.services.ingest.event_store import sqlite_time, store_new
from onceover_backend.services.ingest.times import in_utc
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import Event
from sqlalchemy import Engine, text
from sqlmodel import Session, col, select

from tests.backend import factory as f

RECEIVED = datetime(2026, 11, 2, 8, 30, 0, 250_000, tzinfo=UTC)


def _stored(engine: Engine) -> list[Event]:
    with Session(engine) as session:
        return list(session.exec(select(Event).order_by(col(Event.seq))))


PLUS_TWO = timezone(timedelta(hours=2))


@pytest.mark.parametrize(
    "time",
    [
        datetime(2026, 11, 1, 14, 0, 1, 500_000, tzinfo=PLUS_TWO),
        datetime(2026, 11, 1, 14, 0, 1, tzinfo=PLUS_TWO),  # no microseconds
        datetime(999, 1, 1, 0, 0, 0, 7, tzinfo=PLUS_TWO),  # a year of three digits, in UTC
    ],
    ids=["fraction", "whole second", "year 998"],
)
def test_rows_read_back_as_the_orm_stores_them(engine: Engine, time: datetime) -> None:
    event = f.acked("r1", "r1/s1", 1.5, 0, 10).model_copy(update={"time": time})
    twin = f.acked("r1", "r1/s1", 2, 10, 10)
    with write_transaction(engine) as session:
        stored = store_new(session, [event], [in_utc(event.time)], ['{"a": 1}'], RECEIVED)
        session.add(Event(id=twin.id, type=twin.type, run_id="r1", table_id=twin.table,
                          time=event.time, received_at=RECEIVED, body={"a": 1}))  # fmt: skip

    assert stored == [0]
    mine, orms = _stored(engine)
    assert (mine.id, mine.type, mine.run_id, mine.table_id) == (
        event.id, "append_acknowledged", "r1", f.TABLE,
    )  # fmt: skip
    assert mine.time == event.time == orms.time
    assert mine.time.utcoffset() == timedelta(0)
    assert mine.received_at == RECEIVED == orms.received_at
    assert mine.body == {"a": 1} == orms.body
    if engine.dialect.name == "sqlite":  # the very text the ORM writes, so ranges compare
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT time, received_at FROM event ORDER BY seq"))
            assert [tuple(row) for row in rows] == [
                (sqlite_time(event.time), sqlite_time(RECEIVED))
            ] * 2


def test_only_ids_not_stored_are_inserted(engine: Engine) -> None:
    old, new = f.acked("r1", "r1/s1", 1, 0, 10), f.acked("r1", "r1/s1", 2, 10, 10)
    with write_transaction(engine) as session:
        store_new(session, [old], [in_utc(old.time)], ["{}"], RECEIVED)
    with write_transaction(engine) as session:
        times = [in_utc(old.time), in_utc(new.time)]
        stored = store_new(session, [old, new], times, ["{}", "{}"], RECEIVED)

    assert stored == [1]
    assert [e.id for e in _stored(engine)] == [old.id, new.id]


def test_bodies_given_are_stored_as_given_and_an_id_twice_in_one_batch_once(
    engine: Engine,
) -> None:
    first, second = f.acked("r1", "r1/s1", 1, 0, 10), f.acked("r1", "r1/s1", 2, 10, 10)
    texts = [json.dumps({"sent": n, "id": e.id}) for n, e in enumerate((first, second, first))]

    result = ingest_events(engine, [first, second, first], texts).result

    assert (result.received, result.stored, result.duplicates) == (3, 2, 1)
    assert [e.body for e in _stored(engine)] == [
        {"sent": 0, "id": first.id},
        {"sent": 1, "id": second.id},
    ]


def test_without_bodies_each_event_is_serialized(engine: Engine) -> None:
    event = f.acked("r1", "r1/s1", 1, 0, 10)

    ingest_events(engine, [event])

    (row,) = _stored(engine)
    assert row.body == event.model_dump(mode="json")
