"""Resume after real crashes: the issue's must-show.

(One case resumes through ``spark-submit``, the others through ``python -m``.)

A real job (``python -m onceover_jobs.load_files``, Spark ``local``, the local BigQuery) crashes
at a failpoint; the run becomes ``failed``. One ``POST /api/runs/{id}/resume`` makes
the control plane launch attempt 2 from the run's stored spec, with no failpoints (the
backend never passes its own ``ONCEOVER_*`` variables on). The run ends ``succeeded``,
the control plane reconciles it by itself with ``ok``, and BigQuery holds exactly N
rows with N distinct keys, counted here with our own query.

The crash after the commit also carries the alerts issue's must-show: a rule
``run_failed`` and an endpoint pointing at a local receiver; the crash produces one
signed ``firing`` delivery whose signature verifies (Standard Webhooks reference
library), and the resume one ``resolved`` delivery.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from fastapi import FastAPI
from google.cloud import bigquery
from onceover_backend.services.alerts.evaluator import evaluate

from onceover.bigquery import BigQueryConfig
from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.backend.live import automatic_check, post_resume, wait_for_status
from tests.helpers.webhook_receiver import WebhookReceiver
from tests.jobs.orders import control_plane, counted_keys, crashed_run, served

pytestmark = pytest.mark.spark

ROWS = 4_000
RESUME_DEADLINE_S = 240.0


@pytest.fixture
def app(bq_config: BigQueryConfig, tmp_path: Path) -> FastAPI:
    return control_plane(bq_config, tmp_path, alert_eval_interval_s=0.5, webhook_poll_s=0.2)


def _alert_on_failure(url: str, hook: WebhookReceiver) -> dict[str, Any]:
    """A ``run_failed`` rule and an endpoint at ``hook``; the endpoint."""
    rule = httpx.post(f"{url}/api/alert-rules", headers=bearer(OPERATOR), json={
        "name": "orders load failed", "kind": "run_failed", "severity": "critical",
    }).json()  # fmt: skip
    endpoint: dict[str, Any] = httpx.post(f"{url}/api/webhooks", headers=bearer(OPERATOR), json={
        "name": "on-call", "url": hook.url, "rule_ids": [rule["id"]],
    }).json()  # fmt: skip
    hook.secret = endpoint["secret"]
    return endpoint


def _post_resume(url: str, run_id: str, token: str = OPERATOR, **headers: str) -> httpx.Response:
    return post_resume(url, run_id, token, headers)


def _succeeded(url: str, run_id: str) -> dict[str, Any]:
    body = wait_for_status(url, VIEWER, run_id, "succeeded", timeout_s=RESUME_DEADLINE_S)
    assert body.get("status") == "succeeded", body
    return body


def _assert_exactly_once(
    url: str, rest: bigquery.Client, table: str, run_id: str, log_tail: str
) -> dict[str, Any]:
    body = _succeeded(url, run_id)
    assert [a["status"] for a in body["attempts"]] == ["failed", "succeeded"], log_tail
    assert body["attempts"][1]["launch"]["exit_code"] in (None, 0)
    check = automatic_check(url, VIEWER, run_id, timeout_s=60)
    assert check["status"] == "ok", check
    assert (check["expected_rows"], check["actual_rows"], check["distinct_keys"]) == (
        ROWS, ROWS, ROWS
    )  # fmt: skip
    assert counted_keys(rest, table) == (ROWS, ROWS)
    return body


def _log(url: str, run_id: str, number: int) -> str:
    response = httpx.get(
        f"{url}/api/runs/{run_id}/attempts/{number}/log?tail=40", headers=bearer(VIEWER)
    )
    return "\n".join(response.json().get("lines", [])) if response.status_code == 200 else ""


@pytest.mark.parametrize(
    ("where", "launch_with"),
    [("ledger.after_intent", "python"), ("commit.before", "spark-submit")],
)
def test_a_run_crashed_before_its_commit_is_resumed_to_exactly_n_rows(
    app: FastAPI,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    where: str,
    launch_with: Literal["python", "spark-submit"],
) -> None:
    table = f"{dataset}.orders"
    app.state.settings.launch_with = launch_with
    with served(app) as url:
        run_id = crashed_run(app, url, bq_config, tmp_path, table, where, ROWS)

        resumed = _post_resume(url, run_id)

        assert resumed.status_code == 202, resumed.text
        assert resumed.json()["attempt"] == 2
        launcher = Path(resumed.json()["plan"]["command"][0]).name
        assert (launcher == "spark-submit") == (launch_with == "spark-submit"), launcher
        _assert_exactly_once(url, rest, table, run_id, _log(url, run_id, 2))


def test_a_run_crashed_after_its_commit_is_resumed_with_one_call(
    app: FastAPI,
    bq_config: BigQueryConfig,
    rest: bigquery.Client,
    dataset: str,
    tmp_path: Path,
    hook: WebhookReceiver,
) -> None:
    """The must-show, with the API's guards around the one call that matters, and the
    alert the failure fires and the resume resolves, once each."""
    table = f"{dataset}.orders"
    with served(app) as url:
        endpoint = _alert_on_failure(url, hook)
        run_id = crashed_run(app, url, bq_config, tmp_path, table, "commit.after", ROWS)
        [fired] = hook.wait_for(1, timeout_s=60)

        assert _post_resume(url, run_id, VIEWER).status_code == 403
        dry = httpx.post(
            f"{url}/api/runs/{run_id}/resume?dry_run=true", headers=bearer(OPERATOR), timeout=60
        )
        assert dry.status_code == 200, dry.text
        plan = dry.json()
        # The crash came after BatchCommit and before the ledger heard of it: batch 0
        # waits as an intent, its streams committed in BigQuery.
        assert [i["batch_id"] for i in plan["pending_intents"]] == [0]
        assert plan["pending_intents"][0]["streams"]
        assert plan["last_committed_batch"] is None
        assert plan["checkpoint"] == str((tmp_path / "ckpt").resolve())

        answers: list[httpx.Response] = []
        gate = threading.Barrier(2)

        def call(key: str) -> None:
            gate.wait()
            answers.append(_post_resume(url, run_id, **{"Idempotency-Key": key}))

        threads = [threading.Thread(target=call, args=(k,)) for k in ("first", "second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(a.status_code for a in answers) == [202, 409], [a.text for a in answers]
        accepted = next(a for a in answers if a.status_code == 202)
        assert accepted.json()["attempt"] == 2
        # Launched: resuming until the job's run_started arrives, then running.
        status = httpx.get(f"{url}/api/runs/{run_id}", headers=bearer(VIEWER)).json()["status"]
        assert status in ("resuming", "running")
        again = _post_resume(url, run_id, **{"Idempotency-Key": accepted.json()["idempotency_key"]})
        assert (again.status_code, again.json()) == (202, accepted.json())

        body = _assert_exactly_once(url, rest, table, run_id, _log(url, run_id, 2))
        assert len(body["attempts"]) == 2
        after = _post_resume(url, run_id)
        assert after.status_code == 409
        assert "is succeeded" in after.json()["detail"]
        assert "Committed" in _log(url, run_id, 2)

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

    assert len(hook.all()) == 2, [r.body for r in hook.all()]
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
