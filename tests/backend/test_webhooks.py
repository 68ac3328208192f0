"""Webhook endpoints and deliveries against a real local HTTP receiver, which verifies
every signature with the Standard Webhooks reference library (not our code)."""

from __future__ import annotations

import itertools
import random
from datetime import datetime
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.services.alerts.evaluator import evaluate
from onceover_backend.services.ingest.transaction import ingest_events
from onceover_backend.services.webhooks.dispatch import backoff
from sqlalchemy import Engine

from tests.backend import factory as f
from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.helpers.waiting import wait_until
from tests.helpers.webhook_receiver import Answer, WebhookReceiver

BACKOFF_S = 0.3


@pytest.fixture
def settings(settings: Settings) -> Settings:
    settings.webhook_poll_s = 0.05
    settings.webhook_backoff_s = BACKOFF_S
    settings.webhook_max_attempts = 6
    settings.webhook_timeout_s = 5
    settings.public_url = "http://dashboard.example"
    return settings


def _endpoint(client: TestClient, hook: WebhookReceiver, **fields: Any) -> dict[str, Any]:
    body = {"name": "pager", "url": hook.url, **fields}
    response = client.post("/api/webhooks", json=body, headers=bearer(OPERATOR))
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    hook.secret = created["secret"]
    return created


def _deliveries(client: TestClient, endpoint_id: int) -> list[dict[str, Any]]:
    response = client.get(f"/api/webhooks/{endpoint_id}/deliveries", headers=bearer(VIEWER))
    assert response.status_code == 200, response.text
    data: list[dict[str, Any]] = response.json()["data"]
    return data


def _wait_delivery(
    client: TestClient, endpoint_id: int, status: str, timeout_s: float = 30
) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        return next((d for d in _deliveries(client, endpoint_id) if d["status"] == status), None)

    # the dispatcher runs on its own schedule
    return wait_until(
        f"a {status} delivery", found, timeout_s, seen=lambda: _deliveries(client, endpoint_id)
    )


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/hook", "only http and https"),
        ("http://169.254.169.254/latest/meta-data", "link-local or cloud metadata"),
        ("http://metadata.google.internal/computeMetadata/v1/", "cloud metadata service"),
        ("http://[fe80::1]/hook", "link-local"),
        ("http://[::ffff:169.254.169.254]/", "link-local"),
        ("http://user:pw@example.com/", "credentials"),
        ("http:///nohost", "no host"),
    ],
)
def test_refused_urls_are_a_422_naming_the_url(client: TestClient, url: str, why: str) -> None:
    response = client.post(
        "/api/webhooks", json={"name": "x", "url": url}, headers=bearer(OPERATOR)
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "url"]
    assert why in detail["msg"]
    assert client.get("/api/webhooks", headers=bearer(VIEWER)).json()["count"] == 0


def test_a_network_allowed_on_purpose_is_accepted(settings: Settings, client: TestClient) -> None:
    settings.webhook_allowed_networks = ["169.254.0.0/16"]
    body = {"name": "x", "url": "http://169.254.10.10/hook"}
    assert client.post("/api/webhooks", json=body, headers=bearer(OPERATOR)).status_code == 201


def test_the_secret_is_shown_once_and_a_test_delivery_is_signed(
    client: TestClient, hook: WebhookReceiver
) -> None:
    created = _endpoint(client, hook)
    assert created["secret"].startswith("whsec_")
    shown = client.get(f"/api/webhooks/{created['id']}", headers=bearer(VIEWER)).json()
    assert "secret" not in shown
    assert created["secret"].startswith(shown["secret_hint"].rstrip("…"))
    assert (
        client.post(f"/api/webhooks/{created['id']}/test", headers=bearer(VIEWER)).status_code
        == 403
    )

    answer = client.post(f"/api/webhooks/{created['id']}/test", headers=bearer(OPERATOR))

    assert answer.status_code == 200, answer.text
    delivery = answer.json()
    assert delivery["status"] == "succeeded"
    assert [a["status_code"] for a in delivery["attempts"]] == [200]
    [got] = hook.wait_for(1)
    assert got.verified, got.headers
    assert got.message_id == delivery["message_id"]
    body = got.json()
    assert body["status"] == "firing"
    assert body["alerts"][0]["labels"]["alertname"] == "OnceoverTestNotification"
    assert body["alerts"][0]["generatorURL"] == "http://dashboard.example/alerts"


def test_a_receiver_that_is_down_gets_retries_with_growing_waits_then_the_message(
    client: TestClient, hook: WebhookReceiver
) -> None:
    endpoint = _endpoint(client, hook)
    hook.down()

    first = client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR)).json()
    assert first["status"] == "pending"
    assert "ConnectError" in first["attempts"][0]["error"]
    wait_until(
        "a fourth try",
        lambda: len(_deliveries(client, endpoint["id"])[0]["attempts"]) >= 4 or None,
        30,
    )
    hook.up()  # the same port

    done = _wait_delivery(client, endpoint["id"], "succeeded")
    tries = done["attempts"]
    assert [t["status_code"] for t in tries[:4]] == [None] * 4
    assert tries[-1]["status_code"] == 200
    starts = [datetime.fromisoformat(t["started_at"]).timestamp() for t in tries]
    waits = [b - a for a, b in itertools.pairwise(starts)]
    # A wait is the scheduled backoff plus however late the dispatcher's poll came round, which
    # on a loaded machine can be most of a second; so the growth is checked on the floor each
    # wait cannot go under (base x 2^(n-1), less the 25% jitter), which doubles every try.
    # The last wait may be cut short by the receiver coming back.
    floors = [BACKOFF_S * 2**n * 0.75 - 0.01 for n in range(3)]
    assert all(wait >= floor for wait, floor in zip(waits[:3], floors, strict=True)), waits
    [got] = hook.wait_for(1)
    assert got.verified
    assert got.message_id == first["message_id"]


def test_retry_after_is_honoured(client: TestClient, hook: WebhookReceiver) -> None:
    endpoint = _endpoint(client, hook)
    hook.answers = [Answer(503, retry_after="2")]

    client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR))

    first, second = hook.wait_for(2)
    assert first.answered == 503
    assert second.answered == 200
    assert second.at - first.at >= 2.0 - 0.05  # not the 0.3 s backoff
    assert first.message_id == second.message_id
    done = _wait_delivery(client, endpoint["id"], "succeeded")
    assert done["attempts"][0]["retry_after_s"] == 2


def test_410_disables_the_endpoint_until_it_is_enabled_again(
    client: TestClient, hook: WebhookReceiver
) -> None:
    endpoint = _endpoint(client, hook)
    hook.answers = [Answer(410)]

    gone = client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR)).json()

    assert gone["status"] == "failed"
    assert [a["status_code"] for a in gone["attempts"]] == [410]
    shown = client.get(f"/api/webhooks/{endpoint['id']}", headers=bearer(VIEWER)).json()
    assert shown["enabled"] is False
    assert "410 Gone" in shown["disabled_reason"]
    refused = client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR)).json()
    assert refused["status"] == "failed"
    assert "disabled" in refused["last_error"]
    assert len(hook.all()) == 1

    enabled = client.patch(
        f"/api/webhooks/{endpoint['id']}", json={"enabled": True}, headers=bearer(OPERATOR)
    ).json()
    assert (enabled["enabled"], enabled["disabled_reason"]) == (True, None)
    again = client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR)).json()
    assert again["status"] == "succeeded"


def test_redeliver_sends_the_same_message_again(client: TestClient, hook: WebhookReceiver) -> None:
    endpoint = _endpoint(client, hook)
    sent = client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR)).json()

    again = client.post(
        f"/api/webhooks/{endpoint['id']}/deliveries/{sent['id']}/redeliver",
        headers=bearer(OPERATOR),
    ).json()

    assert (again["kind"], again["redelivery_of"], again["status"]) == (
        "redelivery", sent["id"], "succeeded"
    )  # fmt: skip
    first, second = hook.wait_for(2)
    assert first.message_id == second.message_id == sent["message_id"]
    assert first.body == second.body
    assert second.verified
    missing = client.post(
        f"/api/webhooks/{endpoint['id']}/deliveries/999999/redeliver", headers=bearer(OPERATOR)
    )
    assert missing.status_code == 404


def test_a_failed_run_is_delivered_firing_then_resolved_once_each(
    app: FastAPI, client: TestClient, engine: Engine, hook: WebhookReceiver
) -> None:
    rule = client.post(
        "/api/alert-rules",
        json={"name": "load failed", "kind": "run_failed", "severity": "critical"},
        headers=bearer(OPERATOR),
    ).json()
    endpoint = _endpoint(client, hook, rule_ids=[rule["id"]])
    quiet = WebhookReceiver()  # wants critical only from another rule: gets nothing
    quiet.up()
    try:
        client.post(
            "/api/webhooks",
            json={"name": "other", "url": quiet.url, "severities": ["info"]},
            headers=bearer(OPERATOR),
        )
        ingest_events(engine, [f.started("r", "a1", 0), f.failed("r", "a1", 10, "boom")])
        assert evaluate(engine, "http://dashboard.example", f.at(20)) == 1
        [fired] = hook.wait_for(1)
        ingest_events(engine, [f.started("r", "a2", 30), f.finished("r", "a2", 40, rows=3)])
        assert evaluate(engine, "http://dashboard.example", f.at(50)) == 1
        fired, resolved = hook.wait_for(2)
        assert evaluate(engine, "http://dashboard.example", f.at(60)) == 0
        _wait_delivery(client, endpoint["id"], "succeeded")
        assert app.state.dispatcher.run_once() == []  # nothing left to send
        assert len(hook.all()) == 2
        assert quiet.all() == []
    finally:
        quiet.down()

    assert fired.verified
    assert resolved.verified
    assert fired.message_id != resolved.message_id
    alert = fired.json()["alerts"][0]
    assert fired.json()["status"] == alert["status"] == "firing"
    assert alert["labels"]["run_id"] == "r"
    assert alert["labels"]["severity"] == "critical"
    assert alert["generatorURL"] == "http://dashboard.example/runs/r"
    assert alert["endsAt"] == "0001-01-01T00:00:00Z"
    assert "boom" in alert["annotations"]["summary"]
    done = resolved.json()["alerts"][0]
    assert resolved.json()["status"] == done["status"] == "resolved"
    assert done["fingerprint"] == alert["fingerprint"]
    assert done["endsAt"] > done["startsAt"]


def test_slack_endpoints_get_a_text(client: TestClient, hook: WebhookReceiver) -> None:
    endpoint = _endpoint(client, hook, format="slack")
    client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR))
    [got] = hook.wait_for(1)
    assert list(got.json()) == ["text"]
    assert got.json()["text"].startswith("[FIRING (info)] OnceoverTestNotification")
    assert got.verified


def test_endpoints_name_unknown_rules_and_can_be_deleted(
    client: TestClient, hook: WebhookReceiver
) -> None:
    refused = client.post(
        "/api/webhooks", json={"name": "x", "url": hook.url, "rule_ids": [42]},
        headers=bearer(OPERATOR),
    )  # fmt: skip
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "rule_ids"]
    endpoint = _endpoint(client, hook)
    rotated = client.post(
        f"/api/webhooks/{endpoint['id']}/rotate-secret", headers=bearer(OPERATOR)
    ).json()
    assert rotated["secret"] != endpoint["secret"]
    hook.secret = rotated["secret"]
    client.post(f"/api/webhooks/{endpoint['id']}/test", headers=bearer(OPERATOR))
    assert hook.wait_for(1)[0].verified
    assert (
        client.delete(f"/api/webhooks/{endpoint['id']}", headers=bearer(OPERATOR)).status_code
        == 204
    )
    assert client.get(f"/api/webhooks/{endpoint['id']}", headers=bearer(VIEWER)).status_code == 404


def test_the_scheduled_backoff_grows_with_every_try_whatever_the_jitter() -> None:
    rng = random.Random(7)
    for _ in range(1000):
        planned = [backoff(n, BACKOFF_S, 3600, rng) for n in range(1, 8)]
        assert all(later > earlier for earlier, later in itertools.pairwise(planned)), planned
        assert BACKOFF_S * 0.75 <= planned[0] <= BACKOFF_S * 1.25
    assert backoff(30, BACKOFF_S, 60, rng) == 60  # capped
