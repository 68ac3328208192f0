"""``POST /api/events`` parses and validates its body once (api/event_body.py): a valid
batch is stored with each event's JSON as sent, an invalid one gets FastAPI's 422, and
bodies msgspec refuses are parsed again to say where they are wrong."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.api import body_guard
from onceover_backend.api.event_body import parse
from onceover_backend.tables import Event, Stream, WriteRollup
from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, bearer

JSON = {**bearer(INGEST), "Content-Type": "application/json"}


def _bodies(engine: Engine) -> list[Any]:
    with Session(engine) as session:
        return list(session.exec(select(Event.body).order_by(col(Event.seq))))


def test_each_event_is_stored_as_sent(client: TestClient, engine: Engine) -> None:
    started, acked = f.as_json([f.started("r1", "a1", 0), f.acked("r1", "r1/s1", 1, 0, 5)])
    del started["schema_version"], acked["job"]  # defaults: not sent, not stored
    sent = [dict(reversed(list(started.items()))), acked]  # keys in an order of its own
    body = json.dumps(sent, indent=2).encode()

    answer = client.post("/api/events", content=body, headers=JSON)

    assert answer.status_code == 200, answer.text
    stored = _bodies(engine)
    assert stored == sent
    assert list(stored[0]) == list(sent[0])  # the order it came in
    assert "job" not in stored[1]


def test_an_id_twice_in_one_post_is_stored_once_as_first_sent(
    client: TestClient, engine: Engine
) -> None:
    (acked,) = f.as_json([f.acked("r1", "r1/s1", 1, 0, 5)])
    again = {**acked, "latency_ms": 99.0}  # a retry's measurement: same id, same fact

    answer = client.post("/api/events", json=[acked, again, acked], headers=bearer(INGEST))

    assert answer.json() == {"received": 3, "stored": 1, "duplicates": 2, "run_ids": ["r1"]}
    assert _bodies(engine) == [acked]
    with Session(engine) as session:  # its rows counted once
        assert session.exec(select(func.sum(Stream.rows))).one() == 5
        assert session.exec(select(func.sum(WriteRollup.requests))).one() == 1


def test_an_invalid_batch_gets_fastapis_answer_naming_each_bad_event(
    client: TestClient, engine: Engine
) -> None:
    events = f.as_json(f.full_run("r1"))
    events[2] = {**events[2], "rows": -1}
    events[5] = {**events[5], "extra": True}

    answer = client.post("/api/events", json=events, headers=bearer(INGEST))

    assert answer.status_code == 422
    locs = [error["loc"] for error in answer.json()["detail"]]
    assert locs == [
        ["body", 2, events[2]["type"], "rows"],
        ["body", 5, events[5]["type"], "extra"],
    ]
    assert _bodies(engine) == []


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (b"\xef\xbb\xbf[]", None),  # a BOM: msgspec refuses it, Python's parser takes it
        (b'[{"a": NaN}]', ["body", 0, "a"]),
        (b'[{"a": 1e999}]', ["body", 0, "a"]),
        (b'[{"\\ud800": 1}]', ["body", 0, "\\ud800"]),
        (b"[1,]", None),  # not JSON: FastAPI's own answer
    ],
)
def test_what_msgspec_refuses_is_parsed_again_to_say_where(
    body: bytes, loc: list[Any] | None
) -> None:
    if loc is None:
        assert body_guard._parsed(body, None) in ({}, {"json_body": []})
        return
    with pytest.raises(body_guard.BodyRefusedError) as refused:
        body_guard._parsed(body, None)
    assert refused.value.detail[0]["loc"] == loc


def test_a_valid_batch_parses_to_its_events_and_compact_texts() -> None:
    events = f.as_json([f.started("r1", "a1", 0), f.heartbeat("r1", "a1", 30)])

    batch = parse(json.loads(json.dumps(events)))

    assert batch is not None
    assert batch.events == ev.EVENT_LIST.validate_python(events)
    assert [json.loads(text) for text in batch.texts] == events
    assert all(", " not in text for text in batch.texts)
    assert batch.texts_of(list(batch.events)) is batch.texts
    assert batch.texts_of(ev.EVENT_LIST.validate_python(events)) is None  # not these
    assert parse({"not": "a list"}) is None
    assert parse([{"type": "run_started"}]) is None
