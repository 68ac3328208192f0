"""GET /api/overview: the dashboard's home. Runs that failed or stalled, firing alerts,
and every table's freshness, rows today, retry codes per hour, rows set aside and
newest check, for a hand-built set of runs; the empty answer; and the number of SQL
statements it takes, which does not grow with the tables and runs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient
from onceover_backend.models import AlertRuleCreate
from onceover_backend.services.alerts import rules
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.services.reads.overview import overview
from onceover_backend.services.resume.stalled import mark_stalled
from onceover_backend.tables import Reconciliation
from sqlalchemy import Engine
from sqlmodel import Session

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer
from tests.backend.statements import statements

NOW = f.T0 + timedelta(minutes=30)  # 2026-11-01 12:30 UTC
DAY = timedelta(days=1)
FRESH = f.TABLE
STALE = "p.ds.stale"
NEVER = "p.ds.never"
DLQ = "p.ds.dead_letters"


def _moved(
    events: Sequence[ev.Event], *, table: str = FRESH, by: timedelta = timedelta()
) -> list[ev.Event]:
    """The events into ``table``, ``by`` later (earlier when negative)."""
    return [e.model_copy(update={"table": table, "time": e.time + by}) for e in events]


def _check(
    engine: Engine, check_id: int, run_id: str | None, table: str, status: str, at: datetime
) -> None:
    with Session(engine) as session:
        session.add(
            Reconciliation(
                id=check_id, scope="run" if run_id else "table", run_id=run_id, table_id=table,
                status=status, trigger="api", actor="test", checked_at=at, duration_ms=1.0,
            )
        )  # fmt: skip
        session.commit()


def _build(engine: Engine) -> None:
    """Three tables: one loaded today, one last loaded three days ago by a run that then
    failed, one whose only run failed before committing; a stalled run; two checks."""
    clean = [*f.full_run("clean"), f.out_of_range("clean", "clean/s1", 8, 7)]
    yesterday: list[ev.Event] = [  # 23:00 UTC the day before: in the 24 hours, not today
        f.started("late", "a1", 0),
        f.intent("late", 0, 5, ["late/s1"], 10),
        f.committed("late", 0, 6, ["late/s1"], 10, dead_lettered=5, dead_letter_table=DLQ,
                    dead_letter_streams=["late/dl"]),
        f.finished("late", "a1", 7, 10),
    ]  # fmt: skip
    old: list[ev.Event] = [
        f.started("old", "a1", 0),
        f.intent("old", 0, 5, ["old/s1", "old/s2"], 20),
        f.committed("old", 0, 6, ["old/s1", "old/s2"], 20),
        f.failed("old", "a1", 9, "disk full\nTraceback (most recent call last): ..."),
    ]
    never: list[ev.Event] = [f.started("never", "a1", 0), f.failed("never", "a1", 100, "")]
    stuck: list[ev.Event] = [f.started("stuck", "a1", 60), f.heartbeat("stuck", "a1", 120)]
    batches: list[list[ev.Event]] = [
        clean,
        _moved(yesterday, by=-timedelta(hours=13)),
        _moved(old, table=STALE, by=-3 * DAY),
        _moved(never, table=NEVER),
        stuck,
    ]
    for events in batches:
        ingest_events(engine, events)
    assert mark_stalled(engine, timedelta(minutes=10), now=NOW) == ["stuck"]
    rule = rules.create(engine, AlertRuleCreate(name="Run failed", kind="run_failed",
                                                      severity="critical", for_s=0))  # fmt: skip
    rules.create(engine, AlertRuleCreate(name="Gaps", kind="out_of_range"))  # 5 min: quiet
    assert rule.id == 1
    assert evaluate(engine, "http://onceover.example", NOW) is not None
    _check(engine, 1, "clean", FRESH, "ok", f.T0 + timedelta(minutes=20))
    _check(engine, 2, None, STALE, "mismatch", f.T0 + timedelta(minutes=25))


def _overview(engine: Engine, now: datetime = NOW) -> dict[str, Any]:
    with Session(engine) as session:
        return overview(session, stale_after=DAY, now=now).model_dump(mode="json")


def _z(when: datetime) -> str:
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _hours(**last: int) -> list[dict[str, Any]]:
    """24 empty hours up to NOW's, the last one holding ``last``."""
    first = NOW.replace(minute=0) - timedelta(hours=23)
    hours = [
        {"start": _z(first + timedelta(hours=h)), "requests": 0, "already_exists": 0,
         "out_of_range": 0}
        for h in range(24)
    ]  # fmt: skip
    hours[-1].update(last)
    return hours


def test_the_overview_shows_what_needs_a_look_and_every_table(engine: Engine) -> None:
    _build(engine)

    body = _overview(engine)

    assert body["today_since"] == "2026-11-01T00:00:00Z"  # the UTC day
    assert body["window_since"] == "2026-10-31T13:00:00Z"  # 24 hours, 12:00 the last
    assert body["stale_after_s"] == 86400
    assert body["runs_count"] == 3
    assert [(r["run_id"], r["status"], r["table"], r["link"]) for r in body["runs"]] == [
        ("stuck", "stalled", FRESH, "/runs/stuck"),  # heard from last at T0 + 120 s
        ("never", "failed", NEVER, "/runs/never"),  # ended at T0 + 100 s
        ("old", "failed", STALE, "/runs/old"),  # three days ago
    ]
    reasons = {r["run_id"]: (r["since"], r["reason"]) for r in body["runs"]}
    assert reasons == {
        "stuck": (_z(f.at(120)), "nothing heard from it since 2026-11-01 12:02:00 UTC"),
        "never": (_z(f.at(100)), "The job failed before reporting any batch: it reported no error"),
        "old": (_z(f.at(9) - 3 * DAY), "The job failed after batch 0 committed: disk full"),
    }

    assert body["alerts_count"] == 2
    alerts = sorted(body["alerts"], key=lambda a: a["run_id"])
    assert [(a["rule"], a["severity"], a["run_id"], a["table"], a["since"], a["link"],
             a["subject_link"]) for a in alerts] == [
        ("Run failed", "critical", "never", NEVER, _z(NOW), "/alerts?state=firing&rule=1",
         "/runs/never"),
        ("Run failed", "critical", "old", STALE, _z(NOW), "/alerts?state=firing&rule=1",
         "/runs/old"),
    ]  # fmt: skip
    assert "disk full" in alerts[1]["summary"]

    assert body["tables_count"] == 3
    assert [t["table"] for t in body["tables"]] == [STALE, NEVER, FRESH]  # stale first
    stale, never, fresh = body["tables"]
    assert fresh == {
        "table": FRESH,
        "link": "/tables/onceover-local.ds.orders",
        "last_commit_at": _z(f.at(6)),
        "freshness": "fresh",
        "rows_committed_today": 100,  # not the 10 committed at 23:00 the day before
        "requests": 4,
        "already_exists": 1,
        "out_of_range": 1,
        "hours": _hours(requests=4, already_exists=1, out_of_range=1),
        "rows_dead_lettered": 5,  # set aside by the batch of 23:00
        "reconciliation": {"id": 1, "scope": "run", "run_id": "clean", "table": FRESH,
                           "status": "ok", "checked_at": _z(f.at(1200)), "link": "/runs/clean"},
    }  # fmt: skip
    assert (stale["freshness"], stale["last_commit_at"]) == ("stale", _z(f.at(6) - 3 * DAY))
    assert (stale["rows_committed_today"], stale["requests"], stale["hours"]) == (0, 0, _hours())
    assert stale["reconciliation"]["status"] == "mismatch"
    assert stale["reconciliation"]["link"] == "/tables/p.ds.stale"
    assert (never["freshness"], never["last_commit_at"]) == ("stale", None)  # never committed
    assert never["reconciliation"] is None

    assert body["totals"] == {
        "rows_committed_today": 100,
        "requests": 4,
        "already_exists": 1,
        "out_of_range": 1,
        "hours": _hours(requests=4, already_exists=1, out_of_range=1),
        "rows_dead_lettered": 5,
    }
    assert body["reconciliation"] == stale["reconciliation"]  # the newest of all

    # A day later the load of 12:00 is out of the window, and the table has gone stale.
    later = _overview(engine, NOW + DAY + timedelta(minutes=1))
    fresh_later = next(t for t in later["tables"] if t["table"] == FRESH)
    assert (fresh_later["freshness"], fresh_later["requests"]) == ("stale", 0)
    assert fresh_later["rows_committed_today"] == fresh_later["rows_dead_lettered"] == 0


def test_nothing_yet_is_an_empty_overview(client: TestClient) -> None:
    response = client.get("/api/overview", headers=bearer(VIEWER))

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["runs"], body["alerts"], body["tables"]) == ([], [], [])
    assert (body["runs_count"], body["alerts_count"], body["tables_count"]) == (0, 0, 0)
    assert body["reconciliation"] is None
    totals = body["totals"]
    assert totals["rows_committed_today"] == totals["requests"] == totals["rows_dead_lettered"] == 0
    assert len(totals["hours"]) == 24
    assert all(hour["requests"] == 0 for hour in totals["hours"])


def test_the_route_reads_the_stored_runs_now_and_takes_a_viewer(client: TestClient) -> None:
    """Through HTTP with the real clock: a run loaded a moment ago is fresh."""
    just_now = datetime.now(UTC) - f.at(7)
    events = _moved(f.full_run("recent"), by=just_now)
    posted = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert posted.is_success, posted.text

    assert client.get("/api/overview").status_code == 401
    assert client.get("/api/overview", headers=bearer(INGEST)).status_code == 403
    body = client.get("/api/overview", headers=bearer(VIEWER)).json()
    (table,) = body["tables"]
    assert (table["table"], table["freshness"]) == (FRESH, "fresh")
    assert table["last_commit_at"] == _z(f.at(6) + just_now)
    assert body["runs"] == []


def test_the_overview_takes_the_same_few_statements_however_many_tables_and_runs(
    engine: Engine,
) -> None:
    _build(engine)
    _overview(engine)  # connects first (a dialect may ask the server things once)
    with statements(engine) as few:
        _overview(engine)

    for n in range(12):  # twelve more runs into eight more tables, failed and succeeded
        events = f.full_run(f"more-{n}")
        if n % 2:
            events.append(f.failed(f"more-{n}", "a1", 9, "oops"))
        ingest_events(engine, _moved(events, table=f"p.ds.t{n % 8}"))
        _check(engine, 10 + n, f"more-{n}", f"p.ds.t{n % 8}", "ok", NOW)
    assert evaluate(engine, "http://onceover.example", NOW + timedelta(minutes=1)) is not None
    with statements(engine) as many:
        body = _overview(engine)

    assert (body["tables_count"], body["alerts_count"]) == (11, 8)
    assert len(many) == len(few) <= 11, many  # 3 of them the failed runs' causes
