"""The alerts issue's must-show, with a real job: a rule ``run_failed`` and an endpoint
pointing at a local receiver; a run crashed at ``commit.after`` produces one signed
``firing`` delivery whose signature verifies (Standard Webhooks reference library),
and its resume produces one ``resolved`` delivery. BigQuery holds exactly N rows."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from google.cloud import bigquery

from backend.services.alert_evaluator import evaluate
from onceover.bigquery import BigQueryConfig
from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.backend.live import wait_for_status
from tests.jobs.orders import control_plane, counted_keys, crashed_run, served
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.spark

ROWS = 3_000


@pytest.fixture
def app(bq_config: BigQueryConfig, tmp_path: Path) -> FastAPI:
    return control_plane(bq_config, tmp_path, alert_eval_interval_s=0.5, webhook_poll_s=0.2)


def test_a_crashed_run_fires_once_and_its_resume_resolves_once(
    app: FastAPI, bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.orders"
    hook = WebhookReceiver()
    hook.up()
    try:
        with served(app) as url:
            rule = httpx.post(f"{url}/api/alert-rules", headers=bearer(OPERATOR), json={
                "name": "orders load failed", "kind": "run_failed", "severity": "critical",
            }).json()  # fmt: skip
            endpoint = httpx.post(f"{url}/api/webhooks", headers=bearer(OPERATOR), json={
                "name": "on-call", "url": hook.url, "rule_ids": [rule["id"]],
            }).json()  # fmt: skip
            hook.secret = endpoint["secret"]

            run_id = crashed_run(app, url, bq_config, tmp_path, table, "commit.after", ROWS)

            [fired] = hook.wait_for(1, timeout_s=60)
            resumed = httpx.post(
                f"{url}/api/runs/{run_id}/resume", headers=bearer(OPERATOR), timeout=60
            )
            assert resumed.status_code == 202, resumed.text
            body = wait_for_status(url, VIEWER, run_id, "succeeded", timeout_s=240)
            assert body["status"] == "succeeded", body
            fired, resolved = hook.wait_for(2, timeout_s=60)

            # Settled: another round finds nothing to say, nothing is left to send.
            assert evaluate(app.state.engine, url) == 0
            assert app.state.dispatcher.run_once() == []
            deliveries = httpx.get(
                f"{url}/api/webhooks/{endpoint['id']}/deliveries", headers=bearer(VIEWER)
            ).json()["data"]
            history = httpx.get(
                f"{url}/api/alerts/history?run_id={run_id}", headers=bearer(VIEWER)
            ).json()["data"]
        received = hook.all()
    finally:
        hook.down()

    assert len(received) == 2, [r.body for r in received]
    assert fired.verified
    assert resolved.verified
    firing = fired.json()
    assert firing["status"] == "firing"
    [alert] = firing["alerts"]
    assert alert["labels"]["alertname"] == "orders load failed"
    assert alert["labels"]["run_id"] == run_id
    assert alert["labels"]["table"] == table
    assert alert["generatorURL"] == f"{url}/runs/{run_id}"
    assert resolved.json()["status"] == "resolved"
    assert resolved.json()["alerts"][0]["fingerprint"] == alert["fingerprint"]
    assert sorted((d["event_status"], d["status"]) for d in deliveries) == [
        ("firing", "succeeded"), ("resolved", "succeeded")
    ]  # fmt: skip
    assert [t["status"] for t in history] == ["resolved", "firing"]
    assert counted_keys(rest, table) == (ROWS, ROWS)
