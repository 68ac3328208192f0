"""``onceover serve --workers 2`` on PostgreSQL: two worker processes, each with its own
alert evaluator and webhook dispatcher, and every alert transition reaches the
receiver once; a scrape of /metrics, whichever worker answers, sums both workers'."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from onceover.preflight import free_port
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, TOKENS, VIEWER, bearer
from tests.helpers.waiting import wait_until
from tests.helpers.webhook_receiver import WebhookReceiver

WORKERS = 2
START_S = 180.0  # each worker imports the whole backend; slow on a busy 2-core machine


def _workers(pid: int) -> list[int]:
    """The worker processes uvicorn spawned (not its multiprocessing resource tracker)."""
    found = subprocess.run(["ps", "-ww", "-o", "pid=,args=", "--ppid", str(pid)],
                           capture_output=True, text=True, check=False)  # fmt: skip
    return [int(line.split()[0]) for line in found.stdout.splitlines() if "spawn_main" in line]


@pytest.fixture
def served(
    postgres_url: str, subprocess_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = free_port()
    env = {
        **subprocess_env,
        "ONCEOVER_DATABASE_URL": postgres_url,
        "ONCEOVER_TOKENS": TOKENS,
        "ONCEOVER_FRONTEND_DIST": str(tmp_path / "none"),
        "ONCEOVER_ALERT_EVAL_INTERVAL_S": "0.1",  # every worker evaluates ten times a second
        "ONCEOVER_WEBHOOK_POLL_S": "0.05",
        "ONCEOVER_RECONCILE_ON_SUCCESS": "false",
        "ONCEOVER_LOG_FORMAT": "text",
    }
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "onceover_tools", "serve", "--workers", str(WORKERS),
         "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        log_path = tmp_path / "serve.log"

        def started() -> bool | None:
            workers = log_path.read_text().count("Application startup complete")
            return (workers >= WORKERS and _answers(url)) or None

        def alive() -> None:
            assert process.poll() is None, log_path.read_text()[-3000:]

        # the workers import and start on their own
        wait_until(f"{WORKERS} workers serving", started, START_S, every_s=0.2,
                   between=alive, seen=lambda: log_path.read_text()[-3000:])  # fmt: skip
        yield url, process
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/api/health", timeout=2).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _post(url: str, path: str, token: str, body: Any) -> Any:
    response = httpx.post(f"{url}{path}", json=body, headers=bearer(token), timeout=10)
    assert response.is_success, response.text
    return response.json()


def _evaluated_at(url: str, alert_id: int) -> datetime:
    body = httpx.get(f"{url}/api/alerts/{alert_id}", headers=bearer(VIEWER), timeout=10).json()
    return datetime.fromisoformat(body["evaluated_at"])


def test_two_workers_deliver_each_alert_transition_once(
    served: tuple[str, subprocess.Popen[str]], hook: WebhookReceiver
) -> None:
    url, process = served
    assert len(_workers(process.pid)) == WORKERS
    _post(url, "/api/alert-rules", OPERATOR, {"name": "failed", "kind": "run_failed"})
    hook.secret = _post(url, "/api/webhooks", OPERATOR, {"name": "hook", "url": hook.url})["secret"]

    # Two failed runs: "r" is resumed (firing, then resolved), "kept" stays failed, so
    # its alert is evaluated, and stays firing, every round of either worker.
    failed = [f.started("r", "a1", 0), f.failed("r", "a1", 5)]
    failed += [f.started("kept", "a1", 0), f.failed("kept", "a1", 5)]
    _post(url, "/api/events", INGEST, f.as_json(failed))
    hook.wait_for(2)
    _post(url, "/api/events", INGEST, f.as_json([f.started("r", "a2", 10)]))  # a resume
    hook.wait_for(3)

    # Let both workers evaluate many more rounds: the firing alert's evaluation time
    # moves on by two seconds, twenty rounds of each worker.
    alerts = httpx.get(f"{url}/api/alerts", params={"run_id": "kept"}, headers=bearer(VIEWER))
    (kept,) = alerts.json()["data"]
    settled = _evaluated_at(url, kept["id"])
    # rounds run on the workers' own schedule
    wait_until(
        "the evaluators evaluating for two seconds more",
        lambda: (_evaluated_at(url, kept["id"]) - settled).total_seconds() >= 2 or None,
        30,
        every_s=0.2,
    )

    received = hook.all()
    by_run = sorted(
        (r.json()["alerts"][0]["labels"]["run_id"], r.json()["status"]) for r in received
    )
    assert by_run == [("kept", "firing"), ("r", "firing"), ("r", "resolved")]
    assert all(r.verified for r in received)
    assert len({r.message_id for r in received}) == 3
    history = httpx.get(f"{url}/api/alerts/history", params={"run_id": "r"},
                        headers=bearer(VIEWER)).json()  # fmt: skip
    assert [t["status"] for t in history["data"]] == ["resolved", "firing"]

    # /metrics, whichever worker answers, sums both workers' own measurements: every
    # POST of events counted once in each scrape (each POST on a connection of its own,
    # so that both workers take some).
    posts = 20
    before = [_ingest_posts(url) for _ in range(3)]
    assert len(set(before)) == 1, before
    for number in range(posts):
        _post(url, "/api/events", INGEST, f.as_json([f.started(f"m{number}", "a1", 0)]))
    assert [_ingest_posts(url) for _ in range(6)] == [before[0] + posts] * 6


def _ingest_posts(url: str) -> float:
    """The POST /api/events the latency histogram counted, as one scrape answers."""
    text = httpx.get(f"{url}/metrics", headers=bearer(VIEWER), timeout=10).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "onceover_http_request_duration_seconds_count"
                and sample.labels.get("operation") == "ingestEvents"
            ):
                return sample.value
    return 0.0


def test_more_than_one_worker_on_sqlite_is_refused(subprocess_env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "onceover_backend", "serve", "--workers", "2", "--port", "0"],
        env={**subprocess_env, "ONCEOVER_TOKENS": TOKENS}, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--workers above 1 needs PostgreSQL" in done.stderr
