"""An ingest token carries data, never code: what a run's spec may make the backend run.

Each test is an attack an ingest token's holder could make, reproduced against the real
app (SQLite and PostgreSQL) with real launched processes:

- a ``jobs`` package planted in the folder the spec names as ``cwd`` must not run when
  the run is resumed;
- a later ``run_started`` from any token must not change what Resume launches;
- auto-resume must launch only a spec an operator approved;
- secrets in a spec's arguments or in the deployer's spark-submit arguments must not
  reach anyone through the API (plan, run, attempts, log, audit), whatever the role.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.services.resume.auto_resume import resume_due
from onceover_backend.services.resume.resumer import Resumer
from onceover_backend.tables import AuditLog, Launch
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.backend.test_resume import approve_spec, checkpoint, failed_again, resume, run_of


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    return settings.model_copy(
        update={"launch_monitor_url": "http://127.0.0.1:9", "launch_log_dir": tmp_path / "logs"}
    )


@pytest.fixture
def resumer(app: FastAPI) -> Resumer:
    resumer: Resumer = app.state.resumer
    return resumer


@pytest.fixture(autouse=True)
def _stop_launched(app: FastAPI, client: TestClient) -> Any:
    yield
    app.state.launcher.stop_all(grace_s=5)


def post(client: TestClient, *events: ev.Event) -> None:
    answer = client.post(
        "/api/events", json=[e.model_dump(mode="json") for e in events], headers=bearer(INGEST)
    )
    assert answer.status_code == 200, answer.text


def started(run_id: str, attempt: str, t: float, spec: ev.JobSpec) -> ev.RunStarted:
    return ev.RunStarted(
        attempt_id=attempt, mode="pending", spec=spec, id=ev.event_id(run_id, "started", attempt),
        time=f.at(t), run_id=run_id, table=f.TABLE, job="orders",
    )  # fmt: skip


def spec_for(ckpt: Path, *extra: str, cwd: Path | None = None, **fields: Any) -> ev.JobSpec:
    args = ["--source", "/no/such/dir", "--format", "json", "--table", f.TABLE, "--key", "id",
            "--checkpoint", str(ckpt), *extra]  # fmt: skip
    return ev.JobSpec(
        module="onceover_jobs.load_files", args=args, checkpoint=str(ckpt),
        ledger=str(ckpt / "onceover"),
        cwd=None if cwd is None else str(cwd), **fields,
    )  # fmt: skip


def planted(folder: Path, marker: Path) -> None:
    """An ``onceover_jobs`` package that, imported from ``folder``, leaves ``marker`` behind."""
    package = folder / "onceover_jobs"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "load_files.py").write_text(
        f"import pathlib, os\npathlib.Path({str(marker)!r}).write_text(repr(dict(os.environ)))\n"
    )


def test_a_jobs_package_planted_in_the_specs_folder_never_runs(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    folder, marker = tmp_path / "writable", tmp_path / "ran"
    planted(folder, marker)
    ckpt = checkpoint(tmp_path, "r1")
    post(client, started("r1", "a1", 0, spec_for(ckpt, cwd=folder)),
         f.failed("r1", "a1", 5, "crash"))  # fmt: skip

    answer = resume(client, "r1")  # an operator resumes, approving what the plan shows

    assert answer.status_code == 202, answer.text
    body = failed_again(client, "r1")
    # The installed job ran (and refused the missing --source), in the backend's folder.
    assert "exited with status 2" in body["attempts"][1]["error"]
    assert not marker.exists(), "the planted jobs/onceover_jobs/load_files.py ran"
    work = Path(answer.json()["plan"]["cwd"])
    assert work.is_relative_to(tmp_path / "logs")
    assert work.stat().st_mode & 0o077 == 0
    assert answer.json()["plan"]["command"][1:3] == ["-P", "-m"]


def test_a_later_run_started_does_not_change_what_resume_launches(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    ckpt = checkpoint(tmp_path, "r1")
    mine = spec_for(ckpt)
    post(client, started("r1", "a1", 0, mine), f.failed("r1", "a1", 5, "crash"))
    # Another ingest token's holder reports the same run with a spec of their own.
    theirs = ev.JobSpec(module="onceover_jobs.generate", args=["--out", "/etc"],
                        checkpoint=str(ckpt),
                        auto_resume=ev.AutoResume(max_attempts=5, backoff_s=0))  # fmt: skip
    post(client, started("r1", "evil", 6, theirs), f.failed("r1", "evil", 7, "crash"))

    state = run_of(client, "r1")["spec_state"]
    assert state["spec"]["module"] == "onceover_jobs.load_files"
    assert state["proposed"]["module"] == "onceover_jobs.generate"
    assert state["proposed_by_attempt"] == "evil"
    plan = resume(client, "r1", dry_run="true").json()
    assert plan["command"][3] == "onceover_jobs.load_files"
    assert any("reported a different spec" in w for w in plan["warnings"])
    # Approving "the spec" with the proposal's digest launches nothing.
    wrong = resume(client, "r1", approve=False, approve_spec=state["proposed_digest"])
    assert wrong.status_code == 409, wrong.text
    assert "is not the one a resume would launch" in wrong.json()["detail"]

    launched = resume(client, "r1")

    assert launched.status_code == 202, launched.text
    failed_again(client, "r1")
    with Session(engine) as session:
        (launch,) = session.exec(select(Launch).where(Launch.run_id == "r1"))
    assert launch.command[3] == "onceover_jobs.load_files"
    assert "/etc" not in launch.command
    assert launch.spec_digest == state["digest"]


def test_an_unapproved_spec_is_never_launched_by_anyone(
    client: TestClient, engine: Engine, resumer: Resumer, tmp_path: Path
) -> None:
    ckpt = checkpoint(tmp_path, "r1")
    auto = ev.AutoResume(max_attempts=3, backoff_s=0)
    post(client, started("r1", "a1", 0, spec_for(ckpt, auto_resume=auto)),
         f.failed("r1", "a1", 5, "crash"))  # fmt: skip

    assert resume_due(resumer) == []
    refused = resume(client, "r1", approve=False)
    assert refused.status_code == 409
    assert "no operator has approved its launch spec" in refused.json()["detail"]
    with Session(engine) as session:
        assert list(session.exec(select(Launch))) == []

    approve_spec(client, "r1")
    assert resume_due(resumer) == ["r1"]
    failed_again(client, "r1")
    with Session(engine) as session:
        (launch,) = session.exec(select(Launch))
        entry = session.exec(select(AuditLog).where(AuditLog.action == "autoResumeRun")).one()
    assert (launch.actor, launch.approved_by) == ("onceover", "env:operator")
    assert "on the approval of env:operator" in entry.outcome


def test_operators_decide_on_a_proposed_spec_and_only_operators(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    ckpt = checkpoint(tmp_path, "r1")
    post(client, started("r1", "a1", 0, spec_for(ckpt)), f.failed("r1", "a1", 5, "crash"))
    post(client, started("r1", "a2", 6, spec_for(ckpt, "--stamp")))
    state = run_of(client, "r1")["spec_state"]

    def decide(digest: str, decision: str, token: str = OPERATOR) -> Any:
        return client.post("/api/runs/r1/spec", json={"digest": digest, "decision": decision},
                           headers=bearer(token))  # fmt: skip

    assert decide(state["proposed_digest"], "approve", VIEWER).status_code == 403
    assert decide(state["proposed_digest"], "approve", INGEST).status_code == 403
    assert decide("f" * 64, "approve").status_code == 409
    rejected = decide(state["proposed_digest"], "reject")
    assert rejected.status_code == 200
    assert rejected.json()["proposed"] is None
    post(client, started("r1", "a3", 7, spec_for(ckpt, "--stamp")))
    approved = decide(state["proposed_digest"], "approve").json()

    assert approved["digest"] == state["proposed_digest"]
    assert approved["spec"]["args"][-1] == "--stamp"
    assert (approved["approved_by"], approved["proposed"]) == ("env:operator", None)
    withdrawn = decide(approved["digest"], "reject").json()
    assert withdrawn["approved_by"] is None
    with Session(engine) as session:
        outcomes = [e.outcome for e in session.exec(
            select(AuditLog).where(AuditLog.action == "decideRunSpec").order_by(col(AuditLog.id))
        )]  # fmt: skip
    assert outcomes[-3:] == [f"ok: rejected spec {state['proposed_digest']}",
                             f"ok: approved spec {state['proposed_digest']}",
                             f"ok: rejected spec {state['proposed_digest']}"]  # fmt: skip


SECRETS = ("hunter2", "AKIA-JOB-SECRET", "s3cr3t-sig", "pw-in-url", "DEPLOYER-SECRET")


def test_no_role_reads_a_secret_from_a_spec_or_a_launch_command(
    settings: Settings, client: TestClient, app: FastAPI, tmp_path: Path
) -> None:
    app.state.launcher.settings = settings.model_copy(
        update={"launch_with": "spark-submit", "spark_submit": "/bin/false",
                "spark_submit_args": ["--conf", "spark.hadoop.fs.gs.auth.token=DEPLOYER-SECRET"]}
    )  # fmt: skip
    ckpt = checkpoint(tmp_path, "r1")
    spec = spec_for(ckpt, "--password", "hunter2", "--conf",
                    "spark.hadoop.fs.s3a.secret.key=AKIA-JOB-SECRET",
                    "--input-url=https://user:pw-in-url@host/x?sig=s3cr3t-sig&part=1")  # fmt: skip
    post(client, started("r1", "a1", 0, spec), f.failed("r1", "a1", 5, "crash"))
    launched = resume(client, "r1")
    assert launched.status_code == 202, launched.text
    failed_again(client, "r1")

    reads = {
        "run": ("GET", "/api/runs/r1"),
        "log": ("GET", "/api/runs/r1/attempts/2/log?tail=100"),
        "plan": ("POST", "/api/runs/r1/resume?dry_run=true"),
        "audit": ("GET", "/api/audit?limit=100"),
    }
    seen: dict[tuple[str, str], int] = {}
    for role, token in (("viewer", VIEWER), ("operator", OPERATOR)):
        for what, (method, path) in reads.items():
            answer = client.request(method, path, headers=bearer(token))
            seen[(role, what)] = answer.status_code
            leaked = [s for s in SECRETS if s in answer.text]
            assert not leaked, f"{role} reads {leaked} in {what}"
    assert seen[("viewer", "run")] == seen[("viewer", "log")] == 200
    assert seen[("operator", "plan")] == seen[("operator", "audit")] == 200
    # What is shown still says what runs: the option names and the shape stay.
    shown = launched.json()["plan"]["command"]
    assert shown[0] == "/bin/false"
    assert "--password" in shown
    assert "--conf" in shown
    assert "spark.hadoop.fs.s3a.secret.key=***" in shown
    assert "--input-url=https://user:***@host/x?sig=***&part=1" in shown
    assert sys.executable not in shown
