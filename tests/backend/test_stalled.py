"""A running run that goes quiet becomes ``stalled``; one sweeper at a time across replicas."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.db import build_engine
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.services.resume.stalled import ADVISORY_LOCK_KEY, mark_stalled
from onceover_backend.tables import Attempt, Run
from sqlalchemy import Engine, text
from sqlmodel import Session, select

from onceover.bigquery import BigQueryConfig
from tests.backend import factory as f
from tests.backend.conftest import VIEWER, bearer
from tests.helpers.waiting import wait_until

QUIET = timedelta(minutes=3)


def _status(engine: Engine, run_id: str) -> tuple[str, list[str]]:
    with Session(engine) as session:
        run = session.get(Run, run_id)
        assert run is not None
        attempts = session.exec(select(Attempt).where(Attempt.run_id == run_id)).all()
        return run.status, sorted(a.status for a in attempts)


def test_a_quiet_run_stalls_and_a_newer_event_revives_it(engine: Engine) -> None:
    ingest_events(engine, [f.started("r1", "a1", 0), f.heartbeat("r1", "a1", 30)])
    ingest_events(engine, f.full_run("done"))

    assert mark_stalled(engine, QUIET, now=f.at(30) + QUIET - timedelta(seconds=1)) == []
    assert mark_stalled(engine, QUIET, now=f.at(30) + QUIET + timedelta(seconds=1)) == ["r1"]
    assert _status(engine, "r1") == ("stalled", ["stalled"])
    assert _status(engine, "done")[0] == "succeeded"

    ingest_events(engine, [f.heartbeat("r1", "a1", 20)])  # older than what we knew: still quiet
    assert _status(engine, "r1") == ("stalled", ["stalled"])

    ingest_events(engine, [f.acked("r1", "r1/s1", 400, 0, 5)])  # alive after all
    assert _status(engine, "r1") == ("running", ["running"])

    ingest_events(engine, [f.finished("r1", "a1", 401, rows=5)])
    assert _status(engine, "r1") == ("succeeded", ["succeeded"])


def test_a_stalled_run_that_finishes_late_succeeds(engine: Engine) -> None:
    ingest_events(engine, [f.started("r1", "a1", 0)])
    mark_stalled(engine, QUIET, now=f.at(0) + QUIET * 2)

    ingest_events(engine, [f.finished("r1", "a1", 10, rows=0)])

    assert _status(engine, "r1") == ("succeeded", ["succeeded"])


def test_a_second_postgresql_replica_skips_the_sweep_while_one_holds_it(
    postgres_url: str,
) -> None:
    """(On SQLite the sweep's BEGIN IMMEDIATE serialises replicas instead.)"""
    upgrade_to_head(postgres_url)
    engine = build_engine(postgres_url)
    ingest_events(engine, [f.started("r1", "a1", 0)])
    later = f.at(0) + QUIET * 2

    with engine.connect() as other_replica, other_replica.begin():
        other_replica.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
        assert mark_stalled(engine, QUIET, now=later) is None
        assert _status(engine, "r1")[0] == "running"

    assert mark_stalled(engine, QUIET, now=later) == ["r1"]
    engine.dispose()


def test_the_backend_sweeps_by_itself(settings: Settings) -> None:
    settings.stalled_after_s = 1
    settings.stall_check_interval_s = 0.2
    app = create_app(settings, bigquery=BigQueryConfig())
    with TestClient(app) as client:
        ingest_events(app.state.engine, [f.started("r1", "a1", 0)])  # long ago

        def stalled() -> dict[str, Any] | None:
            body: dict[str, Any] = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()
            return body if body["status"] == "stalled" else None

        body = wait_until("r1 stalled", stalled, 20, every_s=0.1)  # the sweeper's own clock
        assert [a["status"] for a in body["attempts"]] == ["stalled"]
