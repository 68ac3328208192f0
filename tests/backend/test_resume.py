"""Resume through the API, on SQLite and PostgreSQL, with real launched processes.

The runs here are made of events; their checkpoints are real directories with ledger records written
by the sink's own :class:`~onceover_jobs.sink.ledger.records.Ledger`. The job a resume launches is
the real ``python -m onceover_jobs.load_files`` with the run's stored arguments, whose ``--source``
is missing: it exits 2 within a second or two, without Spark, which is what the launcher's
bookkeeping (exit status, log, the run failing again) needs. Resumes of real crashed jobs that end
``succeeded``: tests/jobs/test_resume_job.py.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.services.launch.launcher import HOST
from onceover_backend.services.resume.auto_resume import resume_due
from onceover_backend.services.resume.resumer import Resumer
from onceover_backend.services.resume.stalled import mark_stalled
from onceover_backend.tables import Attempt, AuditLog, Launch, Run, utcnow
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.swaps import begin_swap, mark_swapped
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from onceover import events as ev
from onceover.ledger_files import BatchRecord, StreamCommit, SwapRecord
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.backend.live import serving
from tests.helpers.waiting import wait_until

T = TypeVar("T")
DEADLINE_S = 60.0


def until(what: str, probe: Callable[[], T | None], timeout_s: float = DEADLINE_S) -> T:
    return wait_until(what, probe, timeout_s, every_s=0.1)


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    # The launched job exits before it posts anything; the URL only has to be set.
    return settings.model_copy(
        update={"launch_monitor_url": "http://127.0.0.1:9", "launch_log_dir": tmp_path / "logs"}
    )


@pytest.fixture
def resumer(app: FastAPI) -> Resumer:
    resumer: Resumer = app.state.resumer
    return resumer


@pytest.fixture(autouse=True)
def _stop_launched(app: FastAPI, client: TestClient) -> Any:
    """Launched jobs are stopped, and their exits recorded, while the app still runs."""
    yield
    app.state.launcher.stop_all(grace_s=5)


def checkpoint(tmp_path: Path, run_id: str, *, committed: int = 1, intent: bool = True) -> Path:
    """A checkpoint as the job leaves it after a crash at ``commit.after`` of a batch."""
    root = tmp_path / f"ckpt-{run_id}"
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    ledger = Ledger(root / "onceover", "q1", f.TABLE)
    (root / "onceover").mkdir()
    (root / "onceover" / "run_id").write_text(run_id)
    for batch in range(committed + (1 if intent else 0)):
        (root / "offsets" / str(batch)).write_text("v1")
        record = BatchRecord(
            query_id="q1",
            batch_id=batch,
            table=f.TABLE,
            mode="pending",
            state="intent",
            streams=(StreamCommit(f"stream-{batch}-0", 100, 1000, 0, 0),),
            expected_rows=100,
            intent_at=f"2026-11-01T12:00:0{batch}Z",
        )
        ledger.write_intent(record)
        if batch < committed:
            ledger.mark_committed(record, at="2026-11-01T12:00:09Z", commit_time=None)
            (root / "commits" / str(batch)).write_text("v1")
    return root


def job_args(tmp_path: Path, ckpt: Path) -> list[str]:
    return ["--source", str(tmp_path / "no-such-dir"), "--format", "json", "--table",
            f.TABLE, "--key", "event_id", "--checkpoint", str(ckpt)]  # fmt: skip


def failed_run(
    client: TestClient,
    tmp_path: Path,
    run_id: str,
    *,
    spec: ev.JobSpec | None = None,
    ckpt: Path | None = None,
    auto: ev.AutoResume | None = None,
    end: bool = True,
) -> Path:
    ckpt = ckpt or checkpoint(tmp_path, run_id)
    spec = spec or ev.JobSpec(
        module="onceover_jobs.load_files",
        args=job_args(tmp_path, ckpt),
        checkpoint=str(ckpt),
        ledger=str(ckpt / "onceover"),
        cwd=str(tmp_path),
        auto_resume=auto,
    )
    started = ev.RunStarted(
        attempt_id="a1",
        mode="pending",
        spec=spec,
        id=ev.event_id(run_id, "started"),
        time=f.at(0),
        run_id=run_id,
        table=f.TABLE,
        job="orders",
    )
    events: list[ev.Event] = [started]
    if end:
        events.append(f.failed(run_id, "a1", 5, "commit.after fired: crash"))
    response = client.post(
        "/api/events",
        json=[e.model_dump(mode="json") for e in events],
        headers=bearer(INGEST),
    )
    assert response.status_code == 200, response.text
    return ckpt


def resume(
    client: TestClient,
    run_id: str,
    *,
    token: str = OPERATOR,
    approve: bool = True,
    **params: Any,
) -> httpx2.Response:  # what TestClient answers with
    """``approve``: approve the run's spec with the call, as the dashboard's Resume does
    with the plan the operator confirmed."""
    headers = bearer(token)
    if key := params.pop("key", None):
        headers["Idempotency-Key"] = key
    if approve and not params.get("dry_run"):
        detail = client.get(f"/api/runs/{run_id}", headers=bearer(VIEWER))
        if detail.status_code == 200 and detail.json()["spec_state"]["digest"]:
            params["approve_spec"] = detail.json()["spec_state"]["digest"]
    return client.post(f"/api/runs/{run_id}/resume", params=params, headers=headers)


def approve_spec(client: TestClient, run_id: str) -> None:
    digest = run_of(client, run_id)["spec_state"]["digest"]
    answer = client.post(
        f"/api/runs/{run_id}/spec",
        json={"digest": digest, "decision": "approve"},
        headers=bearer(OPERATOR),
    )
    assert answer.status_code == 200, answer.text


def run_of(client: TestClient, run_id: str) -> dict[str, Any]:
    response = client.get(f"/api/runs/{run_id}", headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def failed_again(client: TestClient, run_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        body = run_of(client, run_id)
        return body if body["status"] == "failed" and len(body["attempts"]) > 1 else None

    return until(f"run {run_id} failed again", probe)


def launches(engine: Engine, run_id: str) -> list[Launch]:
    with Session(engine) as session:
        return list(session.exec(select(Launch).where(Launch.run_id == run_id)))


# -- dry run ---------------------------------------------------------------------------


def test_a_dry_run_shows_the_plan_and_launches_nothing(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    ckpt = failed_run(client, tmp_path, "r1")

    response = resume(client, "r1", dry_run="true")

    assert response.status_code == 200, response.text
    plan = response.json()
    assert plan["run_id"] == "r1"
    assert plan["status"] == "failed"
    assert plan["attempt"] == 2
    assert plan["checkpoint"] == str(ckpt)
    assert plan["ledger"] == str(ckpt / "onceover")
    assert plan["queries"] == ["q1"]
    assert plan["last_committed_batch"] == 0
    assert (plan["committed_batches"], plan["committed_rows"]) == (1, 100)
    (pending,) = plan["pending_intents"]
    assert {k: v for k, v in pending.items() if k not in ("in_bigquery", "resume_will")} == {
        "query_id": "q1", "batch_id": 1, "table": "onceover-local.ds.orders", "write": None,
        "mode": "pending", "expected_rows": 100, "streams": ["stream-1-0"],
        "intent_at": "2026-11-01T12:00:01Z", "commit_time": None,
    }  # fmt: skip
    # No BigQuery knows "stream-1-0": the plan says it could not tell, and why.
    assert pending["in_bigquery"] in ("unknown", "streams_gone")
    assert (plan["spark_last_planned_batch"], plan["spark_last_finished_batch"]) == (1, 0)
    assert plan["command"] == [
        sys.executable, "-P", "-m", "onceover_jobs.load_files", *job_args(tmp_path, ckpt)
    ]  # fmt: skip
    assert plan["cwd"] == str(tmp_path / "logs" / "r1" / "work")
    assert plan["log_path"].endswith("r1/attempt-2.log")
    assert plan["spec"]["approved_by"] is None
    assert plan["warnings"] == []
    assert run_of(client, "r1")["status"] == "failed"
    assert len(run_of(client, "r1")["attempts"]) == 1
    assert launches(engine, "r1") == []
    with Session(engine) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.action == "resumeRun")).one()
    assert (entry.actor, entry.status_code, entry.target) == ("env:operator", 200, "run r1")
    assert entry.outcome.startswith("ok: dry run: ")
    assert '"pending_intents":[{"batch_id":1' in entry.outcome


def overwrite_checkpoint(tmp_path: Path, run_id: str) -> Path:
    """A batch run's three overwrites of one table as the ledger leaves them, each stopped
    at a step: write id-a staged, id-b its swap asked for, id-c swapped."""
    root = tmp_path / f"ckpt-{run_id}"
    for folder in ("offsets", "commits", "onceover"):
        (root / folder).mkdir(parents=True)
    (root / "onceover" / "run_id").write_text(run_id)
    for write, step in (("id-a", "staged"), ("id-b", "swap_asked"), ("id-c", "swapped")):
        ledger = Ledger(root / "onceover", run_id, f.TABLE, write)
        record = BatchRecord(
            query_id=run_id, batch_id=None, table=f.TABLE, mode="pending", state="intent",
            streams=(StreamCommit(f.staging_stream(write), 100, 1000, 0, 0),),
            expected_rows=100, intent_at="2026-11-01T12:00:01Z",
        )  # fmt: skip
        ledger.write_intent(record)
        ledger.mark_committed(record, at="2026-11-01T12:00:02Z", commit_time=None)
        if step == "staged":
            continue
        swap = SwapRecord(
            "swapping", f.TABLE, f.STAGING, "every row of the table", f"job_{write[3:]}", 0,
            "2026-11-01T12:00:03Z", staged_rows=100,
        )  # fmt: skip
        begin_swap(ledger, None, swap, replacing=None)
        if step == "swapped":
            mark_swapped(ledger, None, swap, at="2026-11-01T12:00:04Z")
    return root


def test_the_plan_says_what_a_resume_does_with_an_overwrite_stopped_at_each_step(
    client: TestClient, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1", ckpt=overwrite_checkpoint(tmp_path, "r1"))

    plan = resume(client, "r1", dry_run="true").json()

    assert plan["pending_intents"] == []
    assert (plan["committed_batches"], plan["committed_rows"]) == (3, 300)
    shown = [(o["write"], o["step"], o["job_id"], o["staging_table"], o["staged_rows"])
             for o in plan["overwrites"]]  # fmt: skip
    assert shown == [("id-a", "staged", None, f.STAGING, 100),
                     ("id-b", "swap_asked", "job_b", f.STAGING, 100),
                     ("id-c", "swapped", "job_c", f.STAGING, 100)]  # fmt: skip
    staged, asked, swapped = (o["resume_will"] for o in plan["overwrites"])
    assert staged.startswith("swaps the staged rows in without staging them again")
    assert f"{f.TABLE} holds its old rows" in staged
    assert asked.startswith("asks BigQuery for the same swap job again (it runs once): job job_b")
    assert swapped.startswith("nothing: the rows were replaced (job job_c")
    # Any reader asks the same of the run's intents, without a resume's rights.
    intents = client.get("/api/runs/r1/intents", headers=bearer(VIEWER)).json()
    assert intents["overwrites"] == plan["overwrites"]


def test_any_reader_sees_the_intended_batches_and_what_bigquery_holds_of_them(
    client: TestClient, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    scripted = f.started("r2", "a1", 0).model_copy(update={"spec": None})  # a script
    client.post("/api/events", json=[scripted.model_dump(mode="json")], headers=bearer(INGEST))

    answer = client.get("/api/runs/r1/intents", headers=bearer(VIEWER))

    assert answer.status_code == 200, answer.text
    (pending,) = answer.json()["pending_intents"]
    assert (pending["batch_id"], pending["streams"], pending["expected_rows"]) == (
        1, ["stream-1-0"], 100
    )  # fmt: skip
    assert pending["in_bigquery"] in ("unknown", "streams_gone")  # no BigQuery knows it
    assert answer.json()["unavailable"] is None
    unknown = client.get("/api/runs/r2/intents", headers=bearer(VIEWER)).json()
    assert unknown["pending_intents"] == []
    assert "no launch spec" in unknown["unavailable"]
    assert client.get("/api/runs/nope/intents", headers=bearer(VIEWER)).status_code == 404


# -- launching -------------------------------------------------------------------------


def test_a_resume_launches_attempt_2_which_fails_again_with_its_exit_status_and_log(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    ckpt = failed_run(client, tmp_path, "r1")

    response = resume(client, "r1")

    assert response.status_code == 202, response.text
    accepted = response.json()
    assert (accepted["run_id"], accepted["attempt"], accepted["status"]) == ("r1", 2, "resuming")
    assert accepted["log_url"] == "/api/runs/r1/attempts/2/log"
    assert accepted["plan"]["pending_intents"][0]["batch_id"] == 1
    body = failed_again(client, "r1")
    second = body["attempts"][1]
    assert (second["number"], second["attempt_id"]) == (2, accepted["attempt_id"])
    assert second["status"] == "failed"
    assert "attempt 2 exited with status 2 without reporting its end" in second["error"]
    assert body["error"] == second["error"]
    launch = second["launch"]
    assert (launch["trigger"], launch["actor"], launch["host"]) == ("api", "env:operator", HOST)
    assert (launch["live"], launch["exit_code"]) == (False, 2)
    assert launch["command"][-1] == str(ckpt)
    assert body["attempts"][0]["launch"] is None

    log = client.get("/api/runs/r1/attempts/2/log?tail=5", headers=bearer(VIEWER))
    assert log.status_code == 200, log.text
    tail = log.json()
    assert tail["live"] is False
    assert tail["lines"][-1].endswith("is not a directory")
    assert len(tail["lines"]) <= 5
    whole = client.get("/api/runs/r1/attempts/2/log?tail=1000", headers=bearer(VIEWER)).json()
    assert whole["lines"][0].startswith("# onceover: attempt 2 of run r1, launched by env:operator")
    assert whole["truncated"] is False
    assert Path(tail["path"]).is_file()

    missing = client.get("/api/runs/r1/attempts/1/log", headers=bearer(VIEWER))
    assert missing.status_code == 404
    assert "not launched by the control plane" in missing.json()["detail"]
    with Session(engine) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.action == "resumeRun")).one()
    assert entry.status_code == 202
    digest = accepted["plan"]["spec"]["digest"]
    assert entry.outcome.startswith(
        f"ok: attempt 2 launched on the approval of env:operator (spec {digest}): "
    )
    assert "onceover_jobs.load_files" in entry.outcome
    assert launch["approved_by"] == "env:operator"

    again = resume(client, "r1")  # failed again: resumable again, as attempt 3
    assert again.status_code == 202, again.text
    assert again.json()["attempt"] == 3


def test_the_launched_job_gets_bigquery_and_monitor_settings_but_no_backend_secrets(
    app: FastAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONCEOVER_DATABASE_URL", "postgresql://secret")
    monkeypatch.setenv("ONCEOVER_FAILPOINTS", "commit.after=crash@1")
    monkeypatch.setenv("ONCEOVER_LOG_FORMAT", "text")
    env = app.state.launcher.environment("attempt-x")
    assert env["ONCEOVER_MONITOR_URL"] == "http://127.0.0.1:9"
    assert env["ONCEOVER_MONITOR_TOKEN"] == INGEST
    assert env["ONCEOVER_ATTEMPT_ID"] == "attempt-x"
    assert env["PYSPARK_PYTHON"] == sys.executable
    assert env["ONCEOVER_LOG_FORMAT"] == "text"
    assert "ONCEOVER_DATABASE_URL" not in env
    assert "ONCEOVER_FAILPOINTS" not in env
    assert "ONCEOVER_TOKENS" not in env


def test_a_configured_spark_master_replaces_the_runs_own(settings: Settings, app: FastAPI) -> None:
    from onceover_backend.services.launch.launcher import Launcher

    spec = ev.JobSpec(module="onceover_jobs.load_files", args=["--master", "local[1]", "--x", "y"])
    cluster = settings.model_copy(
        update={"spark_master": "spark://m:7077", "launch_with": "spark-submit",
                "spark_submit": "/opt/spark/bin/spark-submit",
                "spark_submit_args": ["--conf", "spark.executor.memory=2g"]}
    )  # fmt: skip
    command = Launcher(cluster, app.state.launcher.bigquery).command(spec)
    assert command[:5] == [
        "/opt/spark/bin/spark-submit", "--master", "spark://m:7077", "--conf",
        "spark.executor.memory=2g",
    ]  # fmt: skip
    # The executors get this project's code with the job, whatever their image holds.
    assert command[5] == "--py-files"
    assert Path(command[6]).name.startswith("onceover-py-files-")
    assert Path(command[6]).is_file()
    assert command[7].endswith("jobs/onceover_jobs/load_files.py")
    assert command[8:] == ["--x", "y"]
    assert app.state.launcher.command(spec)[4:] == ["--master", "local[1]", "--x", "y"]


# -- one attempt at a time, and idempotency ---------------------------------------------


def test_two_resumes_at_once_launch_one_attempt(
    app: FastAPI, client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    approve_spec(client, "r1")
    answers: list[httpx.Response] = []
    gate = threading.Barrier(2)

    with serving(app) as url:

        def call() -> None:
            gate.wait()
            answers.append(
                httpx.post(f"{url}/api/runs/r1/resume", headers=bearer(OPERATOR), timeout=30)
            )

        threads = [threading.Thread(target=call) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Its exit is recorded before this server's shutdown disposes of the engine.
        app.state.launcher.stop_all(grace_s=5)

    assert sorted(a.status_code for a in answers) == [202, 409], [a.text for a in answers]
    refused = next(a for a in answers if a.status_code == 409).json()["detail"]
    assert "r1" in refused
    assert "one attempt at a time" in refused or "resuming" in refused
    assert len(launches(engine, "r1")) == 1
    assert [a["number"] for a in run_of(client, "r1")["attempts"]] == [1, 2]


def test_the_same_idempotency_key_gets_the_same_answer_and_one_launch(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    failed_run(client, tmp_path, "r2")

    first = resume(client, "r1", key="resume-r1-once")
    second = resume(client, "r1", key="resume-r1-once")
    failed_again(client, "r1")
    third = resume(client, "r1", key="resume-r1-once")  # after the attempt ended, too
    other_run = resume(client, "r2", key="resume-r1-once")

    assert first.status_code == second.status_code == third.status_code == 202
    assert first.json() == second.json() == third.json()
    assert first.json()["idempotency_key"] == "resume-r1-once"
    assert len(launches(engine, "r1")) == 1
    assert other_run.status_code == 409
    assert "was used to resume run 'r1'" in other_run.json()["detail"]
    assert launches(engine, "r2") == []


def test_the_database_allows_one_live_launch_per_run(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")

    def launch(number: int) -> Launch:
        return Launch(run_id="r1", attempt_id=f"a{number}", attempt_number=number,
                      trigger="api", actor="t", requested_at=utcnow(), log_path="x",
                      host="elsewhere")  # fmt: skip

    with write_transaction(engine) as session:
        session.add(launch(2))
    with pytest.raises(IntegrityError), write_transaction(engine) as session:
        session.add(launch(3))
    with write_transaction(engine) as session:  # once the first has ended, another may go
        first = session.exec(select(Launch)).one()
        first.live = False
        session.add(first)
        session.add(launch(3))


def test_a_live_launch_refuses_a_resume_until_its_process_is_gone(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with write_transaction(engine) as session:
            session.add(
                Launch(run_id="r1", attempt_id="a9", attempt_number=9, trigger="api",
                       actor="t", requested_at=utcnow(), log_path="x", host=HOST,
                       pid=process.pid)
            )  # fmt: skip
        refused = resume(client, "r1")
        assert refused.status_code == 409
        assert f"pid {process.pid}" in refused.json()["detail"]
        dry = resume(client, "r1", dry_run="true")
        assert dry.status_code == 200
        assert dry.json()["warnings"] == [
            f"a resume now would be refused: {refused.json()['detail']}"
        ]
    finally:
        process.kill()
        process.wait()

    # Its backend restarted and never saw it exit: the launch is released, not stuck.
    assert resume(client, "r1").status_code == 202


# -- refusals --------------------------------------------------------------------------


def test_only_failed_or_stalled_runs_are_resumed(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    events = [f.started("ok", "a1", 0), f.finished("ok", "a1", 5, 0)]
    response = client.post(
        "/api/events", json=[e.model_dump(mode="json") for e in events], headers=bearer(INGEST)
    )
    assert response.status_code == 200
    failed_run(client, tmp_path, "live", end=False)

    succeeded = resume(client, "ok")
    running = resume(client, "live")

    assert succeeded.status_code == 409
    assert succeeded.json()["detail"] == (
        "run 'ok' is succeeded (attempt 1); only failed or stalled runs can be resumed"
    )
    assert running.status_code == 409
    assert "is running (attempt 1)" in running.json()["detail"]
    assert resume(client, "nobody").status_code == 404
    assert launches(engine, "ok") == launches(engine, "live") == []

    with write_transaction(engine) as session:
        run = session.get(Run, "live")
        assert run is not None
        run.last_event_at = utcnow() - timedelta(hours=1)
        session.add(run)
    assert mark_stalled(engine, timedelta(minutes=3)) == ["live"]
    stalled = resume(client, "live", dry_run="true")
    assert stalled.status_code == 200, stalled.text
    assert (stalled.json()["status"], stalled.json()["warnings"]) == ("stalled", [])


def test_roles_a_viewer_may_not_resume(client: TestClient, tmp_path: Path) -> None:
    failed_run(client, tmp_path, "r1")
    assert resume(client, "r1", token=VIEWER).status_code == 403
    assert resume(client, "r1", token=VIEWER, dry_run="true").status_code == 403
    assert client.post("/api/runs/r1/resume").status_code == 401
    assert run_of(client, "r1")["status"] == "failed"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("missing", "does not exist on this backend's host"),
        ("unreadable", "is unreadable"),
        ("other-run", "the checkpoint belongs to run 'someone-else'"),
        ("module", "is not one this backend launches"),
        ("no-spec", "has no launch spec"),
    ],
)
def test_an_unusable_spec_or_checkpoint_is_a_422_naming_it_and_nothing_launches(
    client: TestClient, engine: Engine, tmp_path: Path, damage: str, message: str
) -> None:
    ckpt = checkpoint(tmp_path, "r1")
    spec: ev.JobSpec | None = None
    if damage == "missing":
        ckpt = tmp_path / "gone"
    elif damage == "unreadable":
        (ckpt / "onceover" / "q1" / "batch-1.json").write_text("{not json")
    elif damage == "other-run":
        (ckpt / "onceover" / "run_id").write_text("someone-else")
    elif damage == "module":
        spec = ev.JobSpec(module="subprocess", args=["-c", "x"], checkpoint=str(ckpt))
    if damage == "no-spec":
        events = [f.started("r1", "a1", 0), f.failed("r1", "a1", 5)]
        body = [e.model_dump(mode="json") for e in events]
        body[0]["spec"] = None
        assert client.post("/api/events", json=body, headers=bearer(INGEST)).status_code == 200
    else:
        failed_run(client, tmp_path, "r1", spec=spec, ckpt=ckpt)

    dry = resume(client, "r1", dry_run="true")
    real = resume(client, "r1")

    for answer in (dry, real):
        assert answer.status_code == 422, answer.text
        assert message in answer.json()["detail"]
    if damage in ("missing", "unreadable"):
        assert str(ckpt) in real.json()["detail"]
    assert run_of(client, "r1")["status"] == "failed"
    assert launches(engine, "r1") == []


def test_a_backend_that_cannot_launch_says_which_setting_is_missing(
    app: FastAPI, client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    app.state.launcher.settings = app.state.settings.model_copy(update={"launch_monitor_url": ""})

    response = resume(client, "r1")

    assert response.status_code == 503
    assert "ONCEOVER_LAUNCH_MONITOR_URL" in response.json()["detail"]
    assert run_of(client, "r1")["status"] == "failed"
    assert launches(engine, "r1") == []


# -- automatic resume and stalls ---------------------------------------------------------


def test_auto_resume_follows_the_jobs_policy_and_is_audited(
    client: TestClient, engine: Engine, resumer: Resumer, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1", auto=ev.AutoResume(max_attempts=2, backoff_s=0))
    failed_run(client, tmp_path, "manual")  # no policy: never resumed by itself
    approve_spec(client, "manual")
    assert resume_due(resumer) == []  # the policy came with the spec: approved first
    approve_spec(client, "r1")

    assert resume_due(resumer) == ["r1"]
    body = failed_again(client, "r1")
    assert resume_due(resumer) == []  # two attempts in all: the policy is spent

    assert [a["number"] for a in body["attempts"]] == [1, 2]
    assert body["attempts"][1]["launch"]["trigger"] == "auto"
    assert body["attempts"][1]["launch"]["actor"] == "onceover"
    assert launches(engine, "manual") == []
    with Session(engine) as session:
        entry = session.exec(select(AuditLog).where(AuditLog.action == "autoResumeRun")).one()
    assert (entry.actor, entry.target, entry.status_code) == ("onceover", "run r1", 202)
    assert entry.outcome.startswith("ok: attempt 2 launched on the approval of env:operator")


def test_auto_resume_waits_for_its_backoff(
    client: TestClient, resumer: Resumer, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1", auto=ev.AutoResume(max_attempts=3, backoff_s=600))
    approve_spec(client, "r1")
    failed_at = f.at(5)

    assert resume_due(resumer, failed_at + timedelta(seconds=599)) == []
    assert resume_due(resumer, failed_at + timedelta(seconds=601)) == ["r1"]


def test_a_resuming_run_whose_job_never_reports_becomes_stalled(
    client: TestClient, engine: Engine, tmp_path: Path
) -> None:
    failed_run(client, tmp_path, "r1")
    with write_transaction(engine) as session:
        run = session.get(Run, "r1")
        assert run is not None
        run.status = "resuming"
        run.updated_at = utcnow() - timedelta(hours=1)
        session.add(run)
        attempt = session.exec(select(Attempt)).one()
        attempt.status = "resuming"
        session.add(attempt)

    assert mark_stalled(engine, timedelta(minutes=3)) == ["r1"]
    assert run_of(client, "r1")["status"] == "stalled"


def test_attempt_numbers_count_up_in_the_order_attempts_are_heard_of(
    client: TestClient, tmp_path: Path
) -> None:
    events = [f.started("r", "x", 0), f.failed("r", "x", 1), f.started("r", "y", 2)]
    body = [e.model_dump(mode="json") for e in events]
    assert client.post("/api/events", json=body[:2], headers=bearer(INGEST)).status_code == 200
    assert client.post("/api/events", json=body[2:], headers=bearer(INGEST)).status_code == 200
    attempts = run_of(client, "r")["attempts"]
    assert [(a["attempt_id"], a["number"]) for a in attempts] == [("x", 1), ("y", 2)]
