"""``onceover demo`` as a user runs it: every story it tells is on the API and in
BigQuery, and Ctrl-C ends it cleanly. The pieces it is built from, on their own."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from onceover_backend.services.webhooks.signing import headers, new_secret
from onceover_tools.demo.progress import DemoStepError, Steps
from onceover_tools.demo.receiver import WebhookReceiver
from onceover_tools.demo.waiting import poll

from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig, bigquery_client
from onceover.errors import OnceoverError
from onceover.preflight import check_port_free
from tests.helpers.processes import ONCEOVER, LineReader, running

ROWS = 2_000
JOBS = ("orders-clean", "orders-faults", "orders-crashed", "orders-tampered")


@pytest.mark.spark
def test_demo_shows_every_story_then_stops_on_ctrl_c(
    subprocess_env: dict[str, str], tmp_path: Path
) -> None:
    with running(
        [*ONCEOVER, "demo", "--rows", str(ROWS)], env=subprocess_env, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    ) as process:  # fmt: skip
        assert process.stdout is not None
        output = LineReader(process.stdout)
        output.wait_for("Ctrl-C to stop.", timeout_s=240)
        printed = "".join(output.lines)
        assert [int(n) for n in re.findall(r"^\[(\d)/8\] ", printed, re.M)] == list(range(1, 9))
        url = _found(r"^Dashboard: (http://\S+?)/ ", printed)
        token = _found(r"operator token\s+(\S+)", printed)
        rest, grpc = _found(r"BigQuery REST\s+(\S+)  \(gRPC (\S+)\)", printed, 2)
        assert '<div id="root">' in httpx.get(f"{url}/", timeout=10).text  # the dashboard
        with httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60
        ) as api:
            runs = _check_stories(api, printed)
        _check_tables(BigQueryConfig(rest, grpc, LOCAL_PROJECT), runs)

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
        output.wait_for("Onceover demo stopped.", timeout_s=5)
    port = int(url.rsplit(":", 1)[1])
    check_port_free("127.0.0.1", port, "--port")  # the backend is gone with it


def _check_stories(api: httpx.Client, printed: str) -> dict[str, Any]:
    """Each run's story, as the API tells it; the runs by job name."""
    listed = api.get("/api/runs").json()["data"]
    runs = {run["job"]: _get(api, f"/api/runs/{run['run_id']}") for run in listed}
    assert sorted(runs) == sorted(JOBS)

    clean = runs["orders-clean"]
    assert (clean["status"], clean["rows_committed"]) == ("succeeded", ROWS)
    assert clean["reconciliation"]["status"] == "ok"

    faults = runs["orders-faults"]
    assert (faults["status"], faults["rows_committed"]) == ("succeeded", ROWS)
    assert faults["already_exists"] > 0
    assert faults["out_of_range"] > 0
    assert faults["write_requests"]["UNAVAILABLE"] > 0

    crashed = runs["orders-crashed"]
    assert crashed["status"] == "failed"
    plan = api.post(f"/api/runs/{crashed['run_id']}/resume", params={"dry_run": "true"})
    assert plan.status_code == 200, plan.text
    assert plan.json()["pending_intents"], plan.json()  # a batch to settle with BigQuery
    assert plan.json()["module"] == "onceover_jobs.load_files"

    tampered = runs["orders-tampered"]
    checks = _get(api, f"/api/runs/{tampered['run_id']}/reconciliations")["data"]
    assert sorted(check["status"] for check in checks) == ["mismatch", "ok"]
    assert tampered["reconciliation"]["status"] == "mismatch"

    (endpoint,) = _get(api, "/api/webhooks")["data"]
    deliveries = _get(api, f"/api/webhooks/{endpoint['id']}/deliveries")["data"]
    alerts = [d for d in deliveries if d["kind"] == "alert"]
    assert len(alerts) >= 3
    assert {d["status"] for d in alerts} == {"succeeded"}
    assert "the receiver at" in printed
    assert "3 with a valid signature" in printed

    return runs


def _check_tables(config: BigQueryConfig, runs: dict[str, Any]) -> None:
    """The clean and the faulty tables hold exactly the generated rows, once each."""
    clean, faults = runs["orders-clean"], runs["orders-faults"]
    client = bigquery_client(config)
    for table in (clean["table"], faults["table"]):
        query = f"SELECT COUNT(*) AS n, COUNT(DISTINCT event_id) AS ids FROM `{table}`"
        row = next(iter(client.query_and_wait(query)))
        assert (row["n"], row["ids"]) == (ROWS, ROWS), table

    client.close()


def _found(pattern: str, text: str, groups: int = 1) -> Any:
    match = re.search(pattern, text, re.M)
    assert match, f"no {pattern!r} in:\n{text}"
    return match[1] if groups == 1 else match.groups()


def _get(api: httpx.Client, path: str) -> Any:
    response = api.get(path)
    assert response.status_code == 200, f"{path}: {response.status_code} {response.text}"
    return response.json()


def test_the_receiver_keeps_each_delivery_and_checks_its_signature() -> None:
    secret = new_secret()
    body = '{"status": "firing"}'
    with WebhookReceiver() as receiver:
        signed = httpx.post(receiver.url, content=body, headers=headers(secret, "msg_1", 1, body))
        forged = httpx.post(
            receiver.url, content=body, headers=headers(new_secret(), "msg_2", 1, body)
        )
        assert (signed.status_code, forged.status_code) == (200, 200)
        received = receiver.received
    assert [d.body for d in received] == [body, body]
    assert [d.signed_with(secret) for d in received] == [True, False]


def test_a_failing_step_names_itself_and_the_logs(tmp_path: Path) -> None:
    out = tmp_path / "out.txt"
    with out.open("w") as stream:
        steps = Steps(3, tmp_path / "logs", out=stream)
        with steps.step("First") as step:
            step.done("fine")
        with pytest.raises(DemoStepError) as failed, steps.step("Second"):
            raise OnceoverError("the thing broke\nmore detail")
    assert out.read_text() == "[1/3] First ... fine\n[2/3] Second ... failed\n"
    assert str(failed.value) == (
        f"demo step 2/3 (Second) failed: the thing broke (logs in {tmp_path / 'logs'})"
    )


def test_poll_returns_the_value_gives_up_at_the_deadline_and_stops_on_ctrl_c() -> None:
    values = iter([None, None, 7])
    assert poll("a value", lambda: next(values), 10, threading.Event()) == 7

    started = time.monotonic()
    with pytest.raises(OnceoverError, match="never did not happen within 0 s"):
        poll("never", lambda: None, 0.3, threading.Event())
    assert time.monotonic() - started >= 0.3

    stop = threading.Event()
    stop.set()
    with pytest.raises(KeyboardInterrupt):
        poll("anything", lambda: None, 10, stop)
