"""Re-drive of a run's set-aside rows through the API: the plan, the refusals, the audit,
a launch (a real child process of the job module) and the counts from a re-drive run's
events.

The launched ``python -P -m onceover_jobs.redrive`` is the real job; with ``JAVA_HOME``
pointing at no JDK it stops at its first step (Spark's Java check) within a second or
two, before BigQuery, which is what the launch's bookkeeping (exit status, log) needs.
Re-drives that send rows: tests/jobs/test_redrive.py.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.services.reconciliation.expected import expected_of_run
from onceover_backend.tables import AuditLog, RedriveLaunch, Run
from sqlalchemy import Engine
from sqlmodel import Session, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.helpers.waiting import wait_until

DEAD = "onceover-local.ds.orders_dead"


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(
        update={"launch_monitor_url": "http://127.0.0.1:9", "launch_log_dir": tmp_path / "logs"}
    )


@pytest.fixture(autouse=True)
def _stop_launched(app: FastAPI, client: TestClient) -> Any:
    yield
    app.state.launcher.stop_all(grace_s=5)


def post(client: TestClient, events: list[ev.Event]) -> None:
    response = client.post("/api/events", json=f.as_json(events), headers=bearer(INGEST))
    assert response.status_code == 200, response.text


def started(run_id: str, spec: ev.JobSpec | None) -> ev.RunStarted:
    return ev.RunStarted(
        attempt_id="a1", mode="pending", spec=spec, id=ev.event_id(run_id, "started"),
        time=f.at(0), run_id=run_id, table=f.TABLE, job="orders",
    )  # fmt: skip


def run_with_rows_set_aside(
    client: TestClient, tmp_path: Path, run_id: str = "r1", *, set_aside: int = 3,
    spec: bool = True,
) -> Path:  # fmt: skip
    """A succeeded run whose one batch committed 100 rows and set ``set_aside`` aside."""
    ckpt = tmp_path / "ckpt"
    job = ev.JobSpec(
        module="onceover_jobs.load_files", args=["--table", f.TABLE], checkpoint=str(ckpt)
    )
    post(client, [
        started(run_id, job if spec else None),
        f.committed(run_id, 0, 1, ["s0"], 100, dead_lettered=set_aside,
                    dead_letter_table=DEAD if set_aside else None,
                    dead_letter_streams=["d0"] if set_aside else ()),
        f.finished(run_id, "a1", 2, 100),
    ])  # fmt: skip
    return ckpt


def redrive_run_events(of_run: str, number: int, landed: int, again: int) -> list[ev.Event]:
    """What a re-drive job's sink reports: its own run, rows landed and set aside again."""
    run_id = f"{of_run}:redrive-{number}"
    return [
        started(run_id, None),
        f.committed(run_id, 0, 11, ["x0"], landed, dead_lettered=again,
                    dead_letter_table=DEAD if again else None,
                    dead_letter_streams=["xd0"] if again else ()),
        f.finished(run_id, "a1", 12, landed),
    ]  # fmt: skip


def redrive(client: TestClient, run_id: str, token: str = OPERATOR, **params: str) -> Any:
    return client.post(f"/api/runs/{run_id}/redrive", params=params, headers=bearer(token))


def audit(engine: Engine) -> list[AuditLog]:
    with Session(engine) as session:
        return list(session.exec(select(AuditLog).where(AuditLog.action == "redriveRun")))


def test_the_plan_names_the_dead_letter_table_the_rows_the_ledger_and_the_command(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    ckpt = run_with_rows_set_aside(client, tmp_path)

    response = redrive(client, "r1", dry_run="true")

    assert response.status_code == 200, response.text
    plan = response.json()
    assert (plan["dead_letter_tables"], plan["dead_letter_table"]) == ([DEAD], DEAD)
    assert (plan["rows_set_aside"], plan["rows_redriven"], plan["rows_to_send"]) == (3, 0, 3)
    assert plan["ledger"] == str(ckpt / "onceover")  # the run's own, as resume reads it
    assert plan["command"] == [
        sys.executable, "-P", "-m", "onceover_jobs.redrive", "r1", f"--dead-letter={DEAD}",
        f"--ledger={ckpt / 'onceover'}", "--monitor-url=http://127.0.0.1:9",
    ]  # fmt: skip
    assert plan["log_path"] == str(tmp_path / "logs" / "r1" / "redrive-1.log")
    assert plan["cwd"] == str(tmp_path / "logs" / "r1" / "work")
    assert len(plan["digest"]) == 64
    with Session(engine) as session:
        assert list(session.exec(select(RedriveLaunch))) == []
    (entry,) = audit(engine)
    assert (entry.actor, entry.status_code, entry.target) == ("env:operator", 200, "run r1")
    assert entry.outcome.startswith("ok: dry run: ")
    assert f'"dead_letter_table":"{DEAD}"' in entry.outcome


def test_refusals_are_answered_and_audited(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    run_with_rows_set_aside(client, tmp_path, "r1")
    run_with_rows_set_aside(client, tmp_path, "clean", set_aside=0)
    run_with_rows_set_aside(client, tmp_path, "script", spec=False)

    viewer = redrive(client, "r1", VIEWER, dry_run="true")
    unknown = redrive(client, "nope", dry_run="true")
    clean = redrive(client, "clean", dry_run="true")
    script = redrive(client, "script", dry_run="true")
    unconfirmed = redrive(client, "r1")
    stale = redrive(client, "r1", approve_plan="0" * 64)

    assert viewer.status_code == 403
    assert unknown.status_code == 404
    assert clean.status_code == 409
    assert "set no rows aside" in clean.json()["detail"]
    assert script.status_code == 422
    assert "does not know the ledger its writes used" in script.json()["detail"]
    assert unconfirmed.status_code == 409
    assert "approve_plan" in unconfirmed.json()["detail"]
    assert stale.status_code == 409
    assert "look at the plan again" in stale.json()["detail"]
    entries = {(e.actor, e.target, e.status_code) for e in audit(engine)}
    assert entries == {
        ("env:viewer", None, 403), ("env:operator", "run nope", 404),
        ("env:operator", "run clean", 409), ("env:operator", "run script", 422),
        ("env:operator", "run r1", 409),
    }  # fmt: skip


def test_a_re_drive_run_is_not_re_driven_itself(client: TestClient, tmp_path: Path) -> None:
    run_with_rows_set_aside(client, tmp_path)
    post(client, redrive_run_events("r1", 1, landed=1, again=2))

    response = redrive(client, "r1:redrive-1", dry_run="true")

    assert response.status_code == 422
    assert "re-drive 'r1'" in response.json()["detail"]


def test_a_launch_starts_the_job_once_records_its_exit_and_log(
    client: TestClient, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_with_rows_set_aside(client, tmp_path)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))  # the job stops at its first step
    digest = redrive(client, "r1", dry_run="true").json()["digest"]

    response = redrive(client, "r1", approve_plan=digest)

    assert response.status_code == 202, response.text
    accepted = response.json()
    assert (accepted["launch"], accepted["status"], accepted["actor"]) == (
        1,
        "launched",
        "env:operator",
    )
    assert accepted["plan"]["digest"] == digest

    def ended() -> dict[str, Any] | None:
        body = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()
        (launch,) = body["redrives"]["launches"]
        return None if launch["live"] else launch

    launch = wait_until("the re-drive job exited", ended, 60, every_s=0.1)
    assert launch["exit_code"] not in (None, 0)
    assert launch["dead_letter_table"] == DEAD
    log = Path(launch["log_path"]).read_text()
    assert log.startswith("# onceover: re-drive launch 1 of run r1, by env:operator")
    assert "JAVA_HOME" in log  # the job's own words
    entries = [e for e in audit(engine) if e.status_code == 202]
    assert len(entries) == 1
    assert entries[0].outcome.startswith("ok: re-drive launch 1 started")


def test_a_second_launch_while_one_is_live_is_refused(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    run_with_rows_set_aside(client, tmp_path)
    with Session(engine) as session:  # a launch another request just committed
        session.add(RedriveLaunch(
            run_id="r1", number=1, actor="someone", requested_at=f.at(3), plan_digest="d",
            dead_letter_table=DEAD, ledger="/l", log_path="/l.log", host="elsewhere",
        ))  # fmt: skip
        session.commit()
    digest = redrive(client, "r1", dry_run="true").json()

    response = redrive(client, "r1", approve_plan=digest["digest"])

    assert any("a launch now would be refused" in w for w in digest["warnings"])
    assert response.status_code == 409
    assert "re-drive launch 1 of run 'r1'" in response.json()["detail"]


def test_the_run_and_its_check_count_the_rows_its_re_drives_landed(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    run_with_rows_set_aside(client, tmp_path, set_aside=5)
    post(client, redrive_run_events("r1", 1, landed=3, again=2))  # 2 refused again
    post(client, redrive_run_events("r1", 2, landed=1, again=1))  # 1 of those landed

    body = client.get("/api/runs/r1", headers=bearer(VIEWER)).json()["redrives"]
    plan = redrive(client, "r1", dry_run="true").json()

    assert (body["rows_set_aside"], body["rows_redriven"], body["rows_still_set_aside"]) == (
        5,
        4,
        1,
    )
    assert [(r["run_id"], r["rows_landed"], r["rows_set_aside_again"]) for r in body["runs"]] == [
        ("r1:redrive-1", 3, 2), ("r1:redrive-2", 1, 1),
    ]  # fmt: skip
    assert body["unavailable"] is None
    assert (plan["rows_redriven"], plan["rows_to_send"]) == (4, 1)
    with Session(engine) as session:  # what a check of the run stores beside rows_set_aside
        run = session.get(Run, "r1")
        assert run is not None
        expected = expected_of_run(session, run, f.TABLE, several=False)
    assert (expected.rows_set_aside, expected.rows_redriven) == (5, 4)

    post(client, redrive_run_events("r1", 3, landed=1, again=0))
    done = redrive(client, "r1", dry_run="true")
    assert done.status_code == 409
    assert "nothing left to send" in done.json()["detail"]
