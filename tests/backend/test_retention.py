"""Retention: rows past their ``ONCEOVER_RETENTION_*`` cutoff are deleted in chunks; what
the product still needs (a run's state, unfinished deliveries, the rollups of the
dashboard's ranges) stays; 0 keeps forever; a bad setting stops the backend naming it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.services.ingest import transaction
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.services.retention import (
    Retention,
    retention_forever,
    sweep,
    sweep_and_record,
)
from onceover_backend.tables import (
    AuditLog,
    DeliveryAttempt,
    Event,
    HourRollup,
    WebhookDelivery,
    WebhookEndpoint,
    WriteRollup,
)
from pydantic import ValidationError
from sqlalchemy import Engine
from sqlmodel import Session, col, func, select

from tests.backend import factory as f
from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.helpers.processes import run_onceover

NOW = f.T0 + timedelta(days=45)
DAY = timedelta(days=1)
KEEP_30 = Retention(events_days=30, rollups_days=30, audit_days=30, deliveries_days=30)
NOTHING = {"events": 0, "rollups": 0, "hour_rollups": 0, "audit": 0, "deliveries": 0}


def _ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def _store(engine: Engine, ages_days: list[float]) -> None:
    """One row of every swept kind per age (oldest first, as they would have arrived);
    each delivery finished (succeeded) with one try."""
    with write_transaction(engine) as session:
        endpoint = WebhookEndpoint(name="hook", url="https://example.com/h", secret="whsec_x")
        session.add(endpoint)
        session.flush()
        assert endpoint.id is not None
        for n, age in enumerate(ages_days):
            when = _ago(age)
            session.add(Event(id=f"e{n}", type="run_heartbeat", run_id="r", table_id=f.TABLE,
                              time=when, received_at=when, body={}))  # fmt: skip
            session.add(WriteRollup(run_id="r", minute=when, table_id=f.TABLE,
                                    stream_type="pending", code="OK", requests=1))  # fmt: skip
            session.add(HourRollup(run_id="r", hour=when, table_id=f.TABLE, code="OK",
                                   requests=1))  # fmt: skip
            session.add(AuditLog(time=when, actor="token:x", action="ingestEvents", method="POST",
                                 path="/api/events", request_id="-", status_code=200,
                                 outcome="ok"))  # fmt: skip
            session.add(_delivery(endpoint.id, n, "succeeded", when))
        session.flush()
        for delivery in session.exec(select(WebhookDelivery)):
            assert delivery.id is not None
            tried = DeliveryAttempt(
                delivery_id=delivery.id, number=1, started_at=delivery.created_at, latency_ms=1
            )
            session.add(tried)


def _delivery(endpoint_id: int, n: int, status: str, when: datetime) -> WebhookDelivery:
    return WebhookDelivery(
        endpoint_id=endpoint_id, message_id=f"msg_{n}", dedupe_key=f"d{n}", kind="test",
        event_status="firing", body="{}", status=status, attempts=1, created_at=when,
        finished_at=when if status in ("succeeded", "failed") else None,
    )  # fmt: skip


def _each_kind(value: object) -> dict[str, object]:
    return {kind: value for kind in NOTHING}


def _stored(engine: Engine) -> dict[str, Sequence[datetime | None]]:
    """The times of what is stored, per kind, in the order they were stored."""
    with Session(engine) as session:
        events = session.exec(select(Event.received_at).order_by(col(Event.seq))).all()
        rollups = session.exec(select(WriteRollup.minute).order_by(col(WriteRollup.id))).all()
        hours = session.exec(select(HourRollup.hour).order_by(col(HourRollup.id))).all()
        audit = session.exec(select(AuditLog.time).order_by(col(AuditLog.id))).all()
        deliveries = session.exec(
            select(WebhookDelivery.finished_at).order_by(col(WebhookDelivery.id))
        ).all()
    return {"events": events, "rollups": rollups, "hour_rollups": hours, "audit": audit,
            "deliveries": deliveries}  # fmt: skip


def _count(engine: Engine, table: Any) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(table)).one())


def test_what_is_past_retention_goes_in_chunks_and_the_rest_stays(engine: Engine) -> None:
    # Seven rows of each kind past 30 days, more than two chunks of 3; one exactly at the
    # cutoff and one a day old stay.
    _store(engine, [37, 36, 35, 34, 33, 32, 31, 30, 1])

    swept = sweep(engine, KEEP_30, now=NOW, chunk=3, pause_s=0)

    assert swept.removed == _each_kind(7)
    assert swept.cutoffs == dict.fromkeys(NOTHING, _ago(30))
    assert _stored(engine) == _each_kind([_ago(30), _ago(1)])
    assert _count(engine, DeliveryAttempt) == 2  # a deleted delivery's tries went with it
    assert "7 events received before" in swept.summary()
    assert sweep(engine, KEEP_30, now=NOW, chunk=3, pause_s=0).removed == NOTHING


def test_a_sweep_stopped_between_chunks_leaves_the_rest_for_the_next(engine: Engine) -> None:
    _store(engine, [37, 36, 35, 34, 33, 32, 31, 1])
    asked: list[bool] = []

    def once() -> bool:
        asked.append(True)
        return len(asked) == 1

    first = sweep(engine, KEEP_30, now=NOW, chunk=3, pause_s=0, keep_going=once)
    assert first.removed == {**NOTHING, "events": 3}
    assert len(_stored(engine)["events"]) == 5

    second = sweep(engine, KEEP_30, now=NOW, chunk=3, pause_s=0)
    assert second.removed == {**_each_kind(7), "events": 4}
    assert _stored(engine) == _each_kind([_ago(1)])


def test_zero_keeps_every_kind_forever(engine: Engine, settings: Settings) -> None:
    _store(engine, [10_000, 500, 31])
    before = _stored(engine)

    swept = sweep(engine, Retention(0, 0, 0, 0), now=NOW, chunk=1, pause_s=0)

    assert swept.removed == NOTHING
    assert swept.cutoffs == dict.fromkeys(NOTHING)
    assert _stored(engine) == before
    # With nothing to delete, no loop waits for its interval: this returns at once.
    forever = settings.model_copy(update={
        "retention_events_days": 0, "retention_rollups_days": 0,
        "retention_audit_days": 0, "retention_deliveries_days": 0,
    })  # fmt: skip
    asyncio.run(asyncio.wait_for(retention_forever(engine, forever, asyncio.Event()), 10))


def test_unfinished_deliveries_stay_whatever_their_age(engine: Engine) -> None:
    with write_transaction(engine) as session:
        endpoint = WebhookEndpoint(name="hook", url="https://example.com/h", secret="whsec_x")
        session.add(endpoint)
        session.flush()
        assert endpoint.id is not None
        for n, (status, age) in enumerate(
            [("pending", 60), ("sending", 60), ("failed", 60), ("succeeded", 60), ("failed", 1)]
        ):
            session.add(_delivery(endpoint.id, n, status, _ago(age)))

    swept = sweep(engine, KEEP_30, now=NOW, pause_s=0)

    assert swept.removed["deliveries"] == 2
    with Session(engine) as session:
        kept = session.exec(select(WebhookDelivery.status, WebhookDelivery.created_at)).all()
    assert sorted(kept) == [("failed", _ago(1)), ("pending", _ago(60)), ("sending", _ago(60))]


def test_an_event_that_arrived_out_of_order_goes_once_those_before_it_do(engine: Engine) -> None:
    # Events go in arrival order, chunk by chunk, and the sweep stops after a chunk that
    # holds a younger one: an older one in a later chunk (from a replica whose clock is
    # behind) waits until the younger one is old too.
    with write_transaction(engine) as session:
        for n, age in enumerate([40, 29, 35]):
            session.add(Event(id=f"e{n}", type="run_heartbeat", run_id="r", table_id=f.TABLE,
                              time=_ago(age), received_at=_ago(age), body={}))  # fmt: skip
    only_events = Retention(events_days=30, rollups_days=0, audit_days=0, deliveries_days=0)

    assert sweep(engine, only_events, now=NOW, chunk=1, pause_s=0).removed["events"] == 1
    assert _stored(engine)["events"] == [_ago(29), _ago(35)]
    assert sweep(engine, only_events, now=NOW + 2 * DAY, chunk=1, pause_s=0).removed["events"] == 2
    assert _stored(engine)["events"] == []


def test_a_runs_state_outlives_its_events(
    engine: Engine, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transaction, "utcnow", lambda: _ago(31))
    ingest_events(engine, f.full_run("old"))
    monkeypatch.setattr(transaction, "utcnow", lambda: _ago(29))
    ingest_events(engine, f.full_run("young"))
    per_run = _count(engine, Event) // 2  # both runs sent the same events
    runs_before = {r: client.get(f"/api/runs/{r}", headers=bearer(VIEWER)).json()
                   for r in ("old", "young")}  # fmt: skip
    only_events = Retention(events_days=30, rollups_days=0, audit_days=0, deliveries_days=0)

    swept = sweep(engine, only_events, now=NOW, pause_s=0)

    assert swept.removed["events"] == per_run
    with Session(engine) as session:
        assert set(session.exec(select(Event.run_id))) == {"young"}
    for run_id, before in runs_before.items():
        after = client.get(f"/api/runs/{run_id}", headers=bearer(VIEWER))
        assert after.status_code == 200
        assert after.json() == before
        assert after.json()["status"] == "succeeded"


def test_the_rollups_of_the_dashboards_longest_range_stay(
    engine: Engine, client: TestClient
) -> None:
    def at_age(days: float) -> float:  # factory times are seconds after T0
        return (_ago(days) - f.T0).total_seconds()

    ingest_events(engine, [
        f.acked("r", "r/s1", at_age(31), 0, 10),
        f.append_error("r", "r/s1", at_age(31), "INTERNAL"),
        f.acked("r", "r/s1", at_age(29), 10, 10), f.acked("r", "r/s1", at_age(1), 20, 10),
    ])  # fmt: skip
    window = {"table": f.TABLE, "step": "1d"}
    last_30_days = {**window, "since": _ago(30).isoformat(), "until": NOW.isoformat()}
    everything = {**window, "since": _ago(40).isoformat(), "until": NOW.isoformat()}

    def chart(params: dict[str, str]) -> dict[str, Any]:
        answer = client.get("/api/metrics/write-errors", params=params, headers=bearer(VIEWER))
        assert answer.status_code == 200, answer.text
        body: dict[str, Any] = answer.json()
        return body

    shown_before = chart(last_30_days)
    assert chart(everything)["requests"] == 4
    # The shortest retention the settings allow for rollups.
    smallest = Retention(events_days=0, rollups_days=30, audit_days=0, deliveries_days=0)

    assert sweep(engine, smallest, now=NOW, pause_s=0).removed["rollups"] == 2

    assert chart(last_30_days) == shown_before
    assert chart(everything)["requests"] == 2
    with Session(engine) as session:
        assert session.exec(select(func.min(WriteRollup.minute))).one() >= _ago(30)


def test_a_runs_retry_counts_outlive_its_rollups(engine: Engine, client: TestClient) -> None:
    """The lists' ALREADY_EXISTS and OUT_OF_RANGE counts are the runs' own, as their other
    totals are: the sweep that removes a run's rollups leaves the lists as they were."""

    def at_age(days: float) -> float:  # factory times are seconds after T0
        return (_ago(days) - f.T0).total_seconds()

    ingest_events(engine, [
        f.acked("r", "r/s1", at_age(31), 0, 10),
        f.already_exists("r", "r/s1", at_age(31), 0, 10),
        f.already_exists("r", "r/s1", at_age(31), 5, 5),
        f.out_of_range("r", "r/s1", at_age(31), 20),
    ])  # fmt: skip

    def listed() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        run = client.get("/api/runs", headers=bearer(VIEWER)).json()["data"][0]
        table = client.get("/api/tables", headers=bearer(VIEWER)).json()["data"][0]
        detail = client.get("/api/runs/r", headers=bearer(VIEWER)).json()
        return run, table, detail

    before = listed()
    for shown in before:
        assert (shown["already_exists"], shown["out_of_range"]) == (2, 1), shown
    only_rollups = Retention(events_days=0, rollups_days=30, audit_days=0, deliveries_days=0)

    removed = sweep(engine, only_rollups, now=NOW, pause_s=0).removed

    assert (removed["rollups"], removed["hour_rollups"]) == (3, 3)  # OK, ALREADY_EXISTS, OOR
    run, table, detail = listed()
    assert (run, table) == before[:2]
    assert (detail["already_exists"], detail["out_of_range"]) == (2, 1)


def test_a_round_that_removed_something_is_in_the_audit_log(
    engine: Engine, client: TestClient
) -> None:
    now = datetime.now(UTC)
    with write_transaction(engine) as session:
        for n, age in enumerate([500, 401, 2]):
            session.add(AuditLog(time=now - timedelta(days=age), actor="token:x",
                                 action="ingestEvents", method="POST", path="/api/events",
                                 request_id=f"q{n}", status_code=200, outcome="ok"))  # fmt: skip
    defaults = Retention.from_settings(Settings())

    sweep_and_record(engine, defaults, pause_s=0)
    sweep_and_record(engine, defaults, pause_s=0)  # nothing left: no second row

    answer = client.get("/api/audit", headers=bearer(OPERATOR))
    assert answer.status_code == 200
    rows = answer.json()["data"]
    assert [(r["action"], r["request_id"]) for r in rows] == [
        ("sweepRetention", "-"),
        ("ingestEvents", "q2"),
    ]
    assert rows[0]["actor"] == "onceover"
    assert rows[0]["outcome"].startswith("ok: removed 2 audit rows written before ")
    assert client.get("/api/audit", headers=bearer(VIEWER)).status_code == 403


def test_the_defaults_are_the_documented_ones() -> None:
    settings = Settings()

    assert Retention.from_settings(settings) == Retention(
        events_days=30, rollups_days=400, audit_days=400, deliveries_days=90
    )
    assert settings.retention_interval_s == 3600


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("ONCEOVER_RETENTION_EVENTS_DAYS", "-1", "-1 is not a number of days"),
        ("ONCEOVER_RETENTION_ROLLUPS_DAYS", "-30", "0 keeps the rows forever"),
        ("ONCEOVER_RETENTION_AUDIT_DAYS", "-5", "-5 is not a number of days"),
        ("ONCEOVER_RETENTION_DELIVERIES_DAYS", "40000", "from 1 to 36,500"),
        ("ONCEOVER_RETENTION_ROLLUPS_DAYS", "7", "shorter than the dashboard's longest range"),
    ],
)
def test_a_bad_retention_setting_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, says: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(ValidationError) as refused:
        Settings()

    assert f"{variable}: " in str(refused.value)
    assert says in str(refused.value)


def test_the_backend_refuses_to_start_with_a_negative_retention(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    env = {**subprocess_env, "ONCEOVER_RETENTION_AUDIT_DAYS": "-1"}

    # A valid setting would serve until the timeout: the refusal comes before it listens.
    result = run_onceover("serve", "--port", "0", env=env, timeout_s=60)

    assert result.returncode == 2
    assert "ONCEOVER_RETENTION_AUDIT_DAYS: -1 is not a number of days" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "onceover.db").exists()  # refused before touching the database
