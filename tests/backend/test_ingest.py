"""``POST /api/events``: atomic, idempotent by event id, order-independent state."""

from __future__ import annotations

import random
import threading
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient
from onceover_backend.models import StreamPublic
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.tables import STREAM_COUNTERS, Batch, Event, Run, Stream, WriteRollup
from sqlalchemy import Engine, func
from sqlmodel import Session, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer
from tests.backend.statements import statements


def _count(engine: Engine, table: type[Any]) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(table)).one())


def _post(client: TestClient, events: list[Any]) -> Any:
    return client.post("/api/events", json=events, headers=bearer(INGEST))


def _run(client: TestClient, run_id: str) -> dict[str, Any]:
    response = client.get(f"/api/runs/{run_id}", headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_batch_is_stored_and_applied(client: TestClient, engine: Engine) -> None:
    events = f.as_json(f.full_run("r1"))

    response = _post(client, events)

    assert response.status_code == 200, response.text
    assert response.json() == {"received": 11, "stored": 11, "duplicates": 0, "run_ids": ["r1"]}
    assert _count(engine, Event) == 11
    run = _run(client, "r1")
    assert run["status"] == "succeeded"
    assert run["rows_committed"] == 100
    assert run["rows_expected"] == 100
    assert run["table"] == f.TABLE
    assert run["job"] == "orders"
    assert run["spec"]["module"] == "onceover_jobs.load_files"
    assert [b["state"] for b in run["batches"]] == ["committed"]
    assert {s["name"]: s["state"] for s in run["streams"]} == {
        "r1/s1": "committed",
        "r1/s2": "committed",
    }
    s1 = next(s for s in run["streams"] if s["name"] == "r1/s1")
    assert (s1["next_offset"], s1["rows"], s1["already_exists"], s1["row_count"]) == (50, 50, 1, 50)
    assert run["write_requests"] == {"OK": 2, "ALREADY_EXISTS": 1}


def test_reposting_stores_nothing_new(client: TestClient, engine: Engine) -> None:
    events = f.as_json(f.full_run("r1"))
    assert _post(client, events).status_code == 200
    before = _run(client, "r1")

    again = _post(client, events)
    partly = _post(client, [events[3], events[3], *f.as_json([f.heartbeat("r1", "a1", 8)])])

    assert again.status_code == 200
    assert again.json() == {"received": 11, "stored": 0, "duplicates": 11, "run_ids": []}
    assert partly.json() == {"received": 3, "stored": 1, "duplicates": 2, "run_ids": ["r1"]}
    assert _count(engine, Event) == 12
    after = _run(client, "r1")
    for field in ("rows_committed", "rows_expected", "streams", "batches", "write_requests"):
        assert after[field] == before[field], field
    with Session(engine) as session:
        assert session.exec(select(func.sum(WriteRollup.requests))).one() == 3


def test_one_bad_event_rejects_the_whole_batch_and_names_it(
    client: TestClient, engine: Engine
) -> None:
    events = f.as_json(f.full_run("r1"))
    events[4] = {**events[4], "offset": -1}  # append_already_exists with a negative offset
    events[7] = {**events[7], "type": "stream_exploded"}
    del events[9]["rows"]  # batch_committed without rows

    response = _post(client, events)

    assert response.status_code == 422
    bad = {(e["loc"][1], e["loc"][-1]) for e in response.json()["detail"]}
    assert (4, "offset") in bad
    assert any(index == 7 for index, _ in bad)
    assert (9, "rows") in bad
    assert {index for index, _ in bad} == {4, 7, 9}
    for table in (Event, Run, Batch, Stream, WriteRollup):
        assert _count(engine, table) == 0, table.__name__


def _set(event: dict[str, Any], path: list[str | int], value: object) -> None:
    holder: Any = event
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value


# Values the schema allows but the database cannot store, nested as deep as events go.
# Ingest screens events with a quick pass and walks only those it flags: each case here
# must be flagged, or it would reach the database (a 500).
UNSTORABLE = [
    pytest.param(0, ["spec", "args", 1], "a\x00b", "value_error", id="NUL in a list in a model"),
    pytest.param(9, ["streams", 1, "rows"], 2**53, "less_than_equal", id="count in a list"),
    pytest.param(9, ["streams", 0, "partition"], 2**31, "less_than_equal", id="int32 in a list"),
    pytest.param(1, ["batch_id"], 2**31, "less_than_equal", id="int32 batch id"),
    pytest.param(3, ["bytes"], 2**53, "less_than_equal", id="count"),
    pytest.param(10, ["time"], "0001-01-01T00:30:00+01:00", "value_error", id="time before UTC"),
    pytest.param(10, ["time"], "9999-12-31T23:30:00-01:00", "value_error", id="time past UTC"),
]


@pytest.mark.parametrize(("index", "path", "value", "kind"), UNSTORABLE)
def test_a_value_the_database_cannot_store_is_422_naming_it(
    client: TestClient,
    engine: Engine,
    index: int,
    path: list[str | int],
    value: object,
    kind: str,
) -> None:
    events = f.as_json(f.full_run("r1"))
    _set(events[index], path, value)

    response = _post(client, events)

    assert response.status_code == 422, response.text
    (error,) = response.json()["detail"]
    assert error["loc"] == ["body", index, events[index]["type"], *path]
    assert error["type"] == kind
    for table in (Event, Run, Batch, Stream, WriteRollup):
        assert _count(engine, table) == 0, table.__name__


def test_values_at_the_limits_are_stored(client: TestClient, engine: Engine) -> None:
    events = f.as_json(f.full_run("r1"))
    _set(events[3], ["bytes"], 2**53 - 1)
    _set(events[9], ["streams", 0, "partition"], 2**31 - 1)
    _set(events[0], ["time"], "0001-01-01T00:30:00+00:00")

    response = _post(client, events)

    assert response.status_code == 200, response.text
    assert _count(engine, Event) == len(events)


def test_a_batch_that_is_not_a_list_is_422(client: TestClient, engine: Engine) -> None:
    response = client.post("/api/events", json={"type": "run_started"}, headers=bearer(INGEST))

    assert response.status_code == 422
    assert _count(engine, Event) == 0


def test_too_many_events_in_one_request_is_422(client: TestClient, app: Any) -> None:
    app.state.settings.max_events_per_request = 5
    events = f.as_json(f.full_run("r1"))

    response = _post(client, events)

    assert response.status_code == 422
    assert "at most 5 events" in response.text


def test_any_arrival_order_gives_the_same_state(client: TestClient) -> None:
    events = [*f.full_run("ordered"), f.heartbeat("ordered", "a1", 3)]
    assert _post(client, f.as_json(events)).status_code == 200
    expected = _run(client, "ordered")

    for seed in range(3):
        run_id = f"shuffled{seed}"
        shuffled = [e.model_copy(update={"run_id": run_id}) for e in events]
        for event in shuffled:  # the same facts about another run: new ids
            object.__setattr__(event, "id", f"{seed:02d}{event.id[2:]}")
        random.Random(seed).shuffle(shuffled)
        for one in shuffled:  # one event per POST: the worst case for ordering
            assert _post(client, f.as_json([one])).status_code == 200
        got = _run(client, run_id)
        for field in ("status", "rows_committed", "rows_expected", "batches_committed"):
            assert got[field] == expected[field], (seed, field)
        assert [(b["state"], b["rows"]) for b in got["batches"]] == [
            (b["state"], b["rows"]) for b in expected["batches"]
        ]
        assert sorted((s["state"], s["rows"], s["next_offset"]) for s in got["streams"]) == sorted(
            (s["state"], s["rows"], s["next_offset"]) for s in expected["streams"]
        )
        assert got["write_requests"] == expected["write_requests"]


def test_late_events_never_move_state_backwards(client: TestClient) -> None:
    s1 = "r1/s1"
    assert _post(client, f.as_json(f.full_run("r1"))).status_code == 200

    late = [f.created("r1", s1, 0.5), f.intent("r1", 0, 0.5, [s1], 1), f.heartbeat("r1", "a1", 6)]
    assert _post(client, f.as_json(late)).status_code == 200

    run = _run(client, "r1")
    assert run["status"] == "succeeded"
    assert next(s for s in run["streams"] if s["name"] == s1)["state"] == "committed"
    assert run["batches"][0]["state"] == "committed"
    assert run["batches"][0]["rows"] == 100


def test_an_older_attempts_late_failure_does_not_fail_a_newer_success(client: TestClient) -> None:
    events = [
        f.started("r1", "a1", 0),
        f.started("r1", "a2", 100),
        f.finished("r1", "a2", 200, rows=10),
    ]
    assert _post(client, f.as_json(events)).status_code == 200

    assert _post(client, f.as_json([f.failed("r1", "a1", 50, "crash")])).status_code == 200

    run = _run(client, "r1")
    assert run["status"] == "succeeded"
    assert run["current_attempt_id"] == "a2"
    assert [(a["attempt_id"], a["status"]) for a in run["attempts"]] == [
        ("a1", "failed"),
        ("a2", "succeeded"),
    ]


def test_a_replayed_batch_counts_once(client: TestClient) -> None:
    s1, s2, s3 = "r1/s1", "r1/s2", "r1/s3"
    events = [
        f.started("r1", "a1", 0),
        f.intent("r1", 0, 1, [s1], 10),
        f.failed("r1", "a1", 3, "crashed after commit"),
        f.started("r1", "a2", 10),
        f.committed("r1", 0, 11, [s1], 10, resolved=True),
        f.created("r1", s2, 12),
        f.skipped("r1", 0, 13, [s2]),
        f.intent("r1", 1, 14, [s3], 5),
        f.committed("r1", 1, 15, [s3], 5),
        f.finished("r1", "a2", 16, rows=15),
    ]

    assert _post(client, f.as_json(events)).status_code == 200

    run = _run(client, "r1")
    assert run["status"] == "succeeded"
    assert len(run["attempts"]) == 2
    assert run["rows_committed"] == 15
    assert run["batches_committed"] == 2
    assert run["rows_reported"] == 15
    first = run["batches"][0]
    assert (first["state"], first["resolved"], first["replays"]) == ("committed", True, 1)
    assert next(s for s in run["streams"] if s["name"] == s2)["state"] == "orphaned"


def test_errors_are_counted_by_code(client: TestClient) -> None:
    s1 = "r1/s1"
    events = [
        f.started("r1", "a1", 0),
        f.acked("r1", s1, 1, 0, 10),
        f.append_error("r1", s1, 2, "UNAVAILABLE"),
        f.out_of_range("r1", s1, 3, 99),
    ]

    assert _post(client, f.as_json(events)).status_code == 200

    run = _run(client, "r1")
    assert run["write_requests"] == {"OK": 1, "UNAVAILABLE": 1, "OUT_OF_RANGE": 1}
    stream = run["streams"][0]
    assert (stream["errors"], stream["out_of_range"]) == (1, 1)
    assert stream["last_error"] == "OUT_OF_RANGE at offset 99: gap"


def test_the_api_shows_every_stream_counter() -> None:
    """The counters ingest adds up for a stream (one list, the table's columns) are all
    in the API's stream."""
    assert set(STREAM_COUNTERS) <= set(StreamPublic.model_fields)


STREAM_TYPE_OF_MODE = [
    ("pending", "PENDING"),
    ("buffered", "BUFFERED"),
    ("committed", "COMMITTED"),
    ("default", "DEFAULT"),
]
"""Each mode and the stream type it writes on (onceover/modes.py's table)."""


def test_every_mode_has_its_stream_type() -> None:
    assert {mode for mode, _ in STREAM_TYPE_OF_MODE} == set(get_args(ev.Mode))
    assert {kind for _, kind in STREAM_TYPE_OF_MODE} == set(get_args(ev.StreamType))


@pytest.mark.parametrize(("mode", "stream_type"), STREAM_TYPE_OF_MODE)
def test_a_stream_first_heard_of_in_a_batch_committed_takes_its_modes_type(
    client: TestClient, mode: ev.Mode, stream_type: str
) -> None:
    """Its executor's events late or lost, a stream known from its batch's commit alone
    is shown with the type its mode writes on."""
    events = [
        f.in_mode(f.intent("late", 0, 1, ["late/p0"], 5), mode),
        f.in_mode(f.committed("late", 0, 2, ["late/p0"], 5), mode),
    ]

    response = _post(client, f.as_json(events))

    assert response.status_code == 200, response.text
    assert [(s["name"], s["stream_type"], s["state"]) for s in _run(client, "late")["streams"]] == [
        ("late/p0", stream_type, "committed")
    ]


def test_a_buffered_mode_run_is_stored_and_shown_with_its_buffered_streams(
    client: TestClient, engine: Engine
) -> None:
    """Each partition keeps one BUFFERED stream across micro-batches 0 and 1; a stream
    whose executor's events never came is known from its batch's commit alone."""
    events = f.buffered_run("buf")
    events += [
        f.in_mode(f.intent("late", 0, 1, ["late/p0"], 5), "buffered"),
        f.in_mode(f.committed("late", 0, 2, ["late/p0"], 5), "buffered"),
    ]

    response = _post(client, f.as_json(events))

    assert response.status_code == 200, response.text
    assert response.json()["stored"] == len(events)
    run = _run(client, "buf")
    assert (run["mode"], run["status"], run["rows_committed"], run["rows_expected"]) == (
        "buffered", "succeeded", 80, 80,
    )  # fmt: skip
    assert [(b["batch_id"], b["mode"], b["state"], b["rows"], len(b["streams"]))
            for b in run["batches"]] == [(0, "buffered", "committed", 40, 2),
                                         (1, "buffered", "committed", 40, 2)]  # fmt: skip
    assert {s["name"]: (s["stream_type"], s["state"], s["partition"], s["rows"], s["next_offset"])
            for s in run["streams"]} == {
        "buf/p0": ("BUFFERED", "committed", 0, 40, 40),
        "buf/p1": ("BUFFERED", "committed", 1, 40, 40),
    }  # fmt: skip
    assert run["write_requests"] == {"OK": 4}
    late = _run(client, "late")
    assert [(s["name"], s["stream_type"], s["state"], s["row_count"]) for s in late["streams"]] == [
        ("late/p0", "BUFFERED", "committed", 5)
    ]
    listed = client.get("/api/runs", params={"job": "orders"}, headers=bearer(VIEWER)).json()
    assert {r["run_id"]: r["mode"] for r in listed["data"]} == {
        "buf": "buffered",
        "late": "buffered",
    }
    with Session(engine) as session:
        assert set(session.exec(select(WriteRollup.stream_type))) == {"BUFFERED"}


def test_an_unknown_mode_or_stream_type_is_refused_naming_the_field(
    client: TestClient, engine: Engine
) -> None:
    # a stream type misspelt, a mode misspelt, a stream type given as a mode
    for index, field, value in ((1, "stream_type", "BUFFERD"), (3, "mode", "bufferd"),
                                (5, "mode", "BUFFERED")):  # fmt: skip
        events = f.as_json(f.buffered_run("buf"))
        events[index][field] = value

        response = _post(client, events)

        assert response.status_code == 422, response.text
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", index, events[index]["type"], field]
        assert error["type"] == "literal_error"
        assert "'buffered'" in error["msg"] or "'BUFFERED'" in error["msg"], error["msg"]
    assert _count(engine, Event) == 0


def test_concurrent_posts_of_one_run_lose_nothing(engine: Engine) -> None:
    """Four threads post overlapping slices of many events of one run at once."""
    events: list[ev.Event] = [f.started("r1", "a1", 0)]
    events += [f.acked("r1", f"r1/s{i % 7}", 1 + i / 100, i, 1) for i in range(400)]
    slices = [events[i::3] + events[:50] for i in range(3)] + [events]
    errors: list[BaseException] = []

    def post(part: list[Any]) -> None:
        try:
            ingest_events(engine, part)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=post, args=(part,)) for part in slices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors
    assert _count(engine, Event) == 401
    with Session(engine) as session:
        assert session.exec(select(func.sum(WriteRollup.requests))).one() == 400
        assert session.exec(select(func.sum(Stream.rows))).one() == 400


@pytest.mark.parametrize("concurrency", [1, 2])
def test_ingest_concurrency_caps_the_batches_one_process_works_on_at_once(
    settings: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch, concurrency: int
) -> None:
    """ONCEOVER_INGEST_CONCURRENCY: at 1 a second batch waits its turn (for the limiter,
    taking no CPU) while the first is stored; at 2 both are worked on at once. Nothing
    is lost either way."""
    from onceover_backend.api.routes import events as route
    from onceover_backend.main import create_app

    from onceover.bigquery import BigQueryConfig
    from tests.helpers.waiting import wait_until

    app = create_app(
        settings.model_copy(update={"ingest_concurrency": concurrency}),
        bigquery=BigQueryConfig(),
    )
    limiter = app.state.ingest_limiter
    store = route._store
    lock = threading.Lock()
    inside = [0, 0]  # now, most
    seen_waiting: list[int] = []  # batches waiting for the limiter, at each look

    def other_waited() -> bool:
        seen_waiting.append(limiter.statistics().tasks_waiting)
        return max(seen_waiting) >= 1

    def tracked(*args: Any, **kwargs: Any) -> Any:
        with lock:
            inside[0] += 1
            inside[1] = max(inside[1], inside[0])
        try:
            # Hold this batch's turn until the other batch is either inside too or
            # waiting for the limiter: only then does the cap show.
            wait_until(
                "the other batch stored beside this one or waiting its turn",
                lambda: inside[1] == 2 or other_waited() or None,
                timeout_s=20,
            )
            return store(*args, **kwargs)
        finally:
            with lock:
                inside[0] -= 1

    monkeypatch.setattr(route, "_store", tracked)
    answers: list[int] = []
    with TestClient(app) as client:

        def post(run_id: str) -> None:
            response = client.post(
                "/api/events", json=f.as_json(f.full_run(run_id)), headers=bearer(INGEST)
            )
            answers.append(response.status_code)

        threads = [threading.Thread(target=post, args=(f"r{n}",)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert answers == [200, 200]
    assert inside[1] == concurrency
    with Session(engine) as session:
        assert session.exec(select(func.count()).select_from(Run)).one() == 2


def test_a_transaction_updates_each_run_it_touches_at_most_twice(engine: Engine) -> None:
    """Each ``UPDATE run`` is a round trip, and on PostgreSQL a new row version: the
    runs are written in two flushes a transaction (what the events added up, then what
    recomputing decided), not in every flush a query set off between them."""
    first = {run: f.full_run(run)[:4] for run in ("r1", "r2")}
    for events in first.values():
        ingest_events(engine, events)
    rest: list[ev.Event] = []
    for run, done in first.items():
        s1 = f"{run}/s1"
        rest += [
            *f.full_run(run)[4:],
            f.heartbeat(run, "a1", 5, rows=50),
            f.out_of_range(run, s1, 3, 7),
            f.rejected(run, s1, 3, 9, [(9, "k", "c", "bad")], dead_letter_table=None),
        ]
        assert len(done) == 4
    with statements(engine) as sent:
        ingest_events(engine, rest)
    updates = [s.sql for s in sent if s.sql.lstrip().upper().startswith("UPDATE RUN ")]

    with Session(engine) as session:
        runs = session.exec(select(Run).order_by(Run.run_id)).all()
    assert [(r.status, r.rows_committed, r.out_of_range_requests, r.rejected_requests)
            for r in runs] == [("succeeded", 100, 1, 1)] * 2  # fmt: skip
    assert 1 <= len(updates) <= 2 * len(runs), updates
