"""Resume plans of runs whose checkpoint and ledger are in a bucket, through the API.

The backend reads them with its own credentials, here the S3 and Cloud Storage stand-ins'
variables (``AWS_ENDPOINT_URL``, ``STORAGE_EMULATOR_HOST``) in its process, as a control
plane on a cluster reads them with its instance's. Each checkpoint is Spark's logs as
objects (``offsets/<n>``, ``commits/<n>``) and ledger records written by the sink's own
:class:`~onceover_jobs.sink.ledger.records.Ledger`. A ledger the backend cannot read is a
422 naming its URL, and nothing launches. Resumes of checkpoints on a disk:
tests/backend/test_resume.py.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.tables import Launch
from onceover_jobs.sink.ledger.records import Ledger
from sqlalchemy import Engine
from sqlmodel import Session, select

from onceover import events as ev
from onceover.ledger_files import BatchRecord, StreamCommit
from onceover.ledger_store import open_store
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer
from tests.helpers.object_stores import bucket_name
from tests.helpers.waiting import wait_until

DEADLINE_S = 60.0


@pytest.fixture
def settings(settings: Settings, tmp_path: Path) -> Settings:
    # The launched job exits before it posts anything; the URL only has to be set.
    return settings.model_copy(
        update={"launch_monitor_url": "http://127.0.0.1:9", "launch_log_dir": tmp_path / "logs"}
    )


@pytest.fixture(autouse=True)
def _stop_launched(app: FastAPI, client: TestClient) -> Iterator[None]:
    """Launched jobs are stopped, and their exits recorded, while the app still runs."""
    yield
    app.state.launcher.stop_all(grace_s=5)


def stand_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str) -> str:
    """A bucket of this test's own on the ``kind`` stand-in (``s3``, ``gcs``), whose
    variables this process (the backend, and the jobs it launches) then has."""
    server = request.getfixturevalue(f"local_{kind}")
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    url: str = request.getfixturevalue(f"{kind}_bucket")
    return url


@dataclass(frozen=True)
class Where:
    checkpoint: str
    ledger: str
    spec_ledger: str | None
    """What the spec says of the ledger: None when it is ``<checkpoint>/onceover``."""


def where(bucket: str, kind: str) -> Where:
    """S3: a ledger the spec names apart from its checkpoint; Cloud Storage: the ledger
    in its default place, ``<checkpoint>/onceover``."""
    checkpoint = f"{bucket}/checkpoints/q1"
    if kind == "s3":
        return Where(checkpoint, f"{bucket}/ledgers/q1", f"{bucket}/ledgers/q1")
    return Where(checkpoint, f"{checkpoint}/onceover", None)


def crashed_checkpoint(at: Where, run_id: str, *, committed: int = 1) -> None:
    """What the job leaves after a crash at ``commit.after`` of batch ``committed``."""
    spark = open_store(at.checkpoint)
    ledger = Ledger(at.ledger, "q1", f.TABLE)
    open_store(at.ledger).put("run_id", run_id.encode())
    for batch in range(committed + 1):
        spark.put(f"offsets/{batch}", b"v1")
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
            spark.put(f"commits/{batch}", b"v1")


def job_args(tmp_path: Path, checkpoint: str) -> list[str]:
    return ["--source", str(tmp_path / "no-such-dir"), "--format", "json", "--table",
            f.TABLE, "--key", "event_id", "--checkpoint", checkpoint]  # fmt: skip


def failed_run(client: TestClient, tmp_path: Path, run_id: str, at: Where) -> None:
    spec = ev.JobSpec(
        module="onceover_jobs.load_files",
        args=job_args(tmp_path, at.checkpoint),
        checkpoint=at.checkpoint,
        ledger=at.spec_ledger,
        cwd=str(tmp_path),
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
    events = [started, f.failed(run_id, "a1", 5, "commit.after fired: crash")]
    response = client.post(
        "/api/events", json=[e.model_dump(mode="json") for e in events], headers=bearer(INGEST)
    )
    assert response.status_code == 200, response.text


def resume(client: TestClient, run_id: str, **params: str) -> Any:
    if not params.get("dry_run"):
        detail = client.get(f"/api/runs/{run_id}", headers=bearer(VIEWER)).json()
        params["approve_spec"] = detail["spec_state"]["digest"]
    return client.post(f"/api/runs/{run_id}/resume", params=params, headers=bearer(OPERATOR))


def launches(engine: Engine, run_id: str) -> list[Launch]:
    with Session(engine) as session:
        return list(session.exec(select(Launch).where(Launch.run_id == run_id)))


@pytest.mark.parametrize("kind", ["s3", "gcs"])
def test_a_checkpoint_in_a_bucket_gets_a_plan_and_its_resume_launches_with_the_url(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    client: TestClient,
    engine: Engine,
    tmp_path: Path,
    kind: str,
) -> None:
    at = where(stand_in(request, monkeypatch, kind), kind)
    crashed_checkpoint(at, "r1")
    failed_run(client, tmp_path, "r1", at)

    dry = resume(client, "r1", dry_run="true")

    assert dry.status_code == 200, dry.text
    plan = dry.json()
    assert (plan["checkpoint"], plan["ledger"]) == (at.checkpoint, at.ledger)
    assert plan["queries"] == ["q1"]
    assert plan["last_committed_batch"] == 0
    assert (plan["committed_batches"], plan["committed_rows"]) == (1, 100)
    (pending,) = plan["pending_intents"]
    assert (pending["batch_id"], pending["streams"], pending["expected_rows"]) == (
        1, ["stream-1-0"], 100
    )  # fmt: skip
    assert (plan["spark_last_planned_batch"], plan["spark_last_finished_batch"]) == (1, 0)
    assert plan["warnings"] == []
    intents = client.get("/api/runs/r1/intents", headers=bearer(VIEWER)).json()
    assert [i["batch_id"] for i in intents["pending_intents"]] == [1]
    assert intents["unavailable"] is None
    assert launches(engine, "r1") == []

    accepted = resume(client, "r1")

    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["plan"]["ledger"] == at.ledger
    assert accepted.json()["plan"]["command"] == [
        sys.executable, "-P", "-m", "onceover_jobs.load_files", *job_args(tmp_path, at.checkpoint)
    ]  # fmt: skip

    def ended() -> Launch | None:
        (launch,) = launches(engine, "r1")
        return launch if not launch.live else None

    launch = wait_until("the resumed attempt to exit", ended, DEADLINE_S, every_s=0.1)
    assert launch.command[-1] == at.checkpoint  # the spec's URL, as the job sent it
    assert launch.exit_code == 2  # its --source is missing: it stops before any write


@pytest.mark.parametrize(
    ("kind", "damage", "message"),
    [
        pytest.param(*case, id=f"{case[0]}-{case[1]}")
        for case in (
            ("s3", "no-bucket", "The specified bucket does not exist"),
            ("gcs", "no-bucket", "cannot read the checkpoint gs://"),
            ("s3", "ledger-bucket", "cannot read the ledger s3://"),
            ("s3", "unreadable", "is unreadable"),
            ("gcs", "other-run", "the checkpoint belongs to run 'someone-else'"),
            ("s3", "no-store", "hdfs:// cannot hold the ledger"),
        )
    ],
)
def test_a_ledger_or_checkpoint_the_backend_cannot_read_is_a_422_naming_its_url(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    client: TestClient,
    engine: Engine,
    tmp_path: Path,
    kind: str,
    damage: str,
    message: str,
) -> None:
    bucket = stand_in(request, monkeypatch, kind)
    at = where(bucket, kind)
    crashed_checkpoint(at, "r1")
    named = at.checkpoint
    if damage == "no-bucket":
        at = where(bucket.replace(bucket.split("://")[1], bucket_name()), kind)
        named = at.checkpoint
    elif damage == "ledger-bucket":  # Spark's logs are readable, the ledger is not
        named = f"s3://{bucket_name()}/ledgers/q1"
        at = Where(at.checkpoint, named, named)
    elif damage == "unreadable":
        named = f"{at.ledger}/q1/{f.TABLE}/batch-1.json"
        open_store(at.ledger).put(f"q1/{f.TABLE}/batch-1.json", b"{not json")
    elif damage == "other-run":
        named = f"{at.ledger}/run_id"
        open_store(at.ledger).put("run_id", b"someone-else")
    elif damage == "no-store":
        named = "hdfs://namenode/ledgers/q1"
        at = Where(at.checkpoint, named, named)
    failed_run(client, tmp_path, "r1", at)

    dry = resume(client, "r1", dry_run="true")
    real = resume(client, "r1")

    for answer in (dry, real):
        assert answer.status_code == 422, answer.text
        assert message in answer.json()["detail"]
        assert named in answer.json()["detail"]
    assert launches(engine, "r1") == []
    intents = client.get("/api/runs/r1/intents", headers=bearer(VIEWER)).json()
    assert intents["pending_intents"] == []
    assert named in intents["unavailable"]


def test_a_checkpoint_url_with_nothing_under_it_yet_plans_with_a_warning(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, client: TestClient,
    tmp_path: Path,
) -> None:  # fmt: skip
    """A prefix has no directory to be missing: the job failed before it wrote anything."""
    at = where(stand_in(request, monkeypatch, "gcs"), "gcs")
    failed_run(client, tmp_path, "r1", at)

    dry = resume(client, "r1", dry_run="true")

    assert dry.status_code == 200, dry.text
    plan = dry.json()
    assert (plan["queries"], plan["pending_intents"], plan["committed_batches"]) == ([], [], 0)
    assert (plan["spark_last_planned_batch"], plan["spark_last_finished_batch"]) == (None, None)
    assert plan["warnings"] == [f"the ledger {at.ledger} holds nothing yet: no batch was recorded"]
