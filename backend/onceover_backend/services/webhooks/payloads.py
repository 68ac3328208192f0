"""What a delivery says: Alertmanager's webhook body, or a Slack incoming-webhook text.

The body follows Alertmanager's webhook (version 4): ``status``, ``alerts[]`` with
``labels``, ``annotations``, ``startsAt``, ``endsAt``, ``generatorURL`` and
``fingerprint``, and the group fields receivers written for Alertmanager read. Each
delivery carries one alert, so the group is that alert.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from onceover_backend.tables import Alert, AlertRule, AlertTransition, WebhookEndpoint

# Alertmanager's "not ended yet".
NOT_ENDED = "0001-01-01T00:00:00Z"
TEST_ALERT_NAME = "OnceoverTestNotification"


def _time(value: datetime | None) -> str:
    if value is None:
        return NOT_ENDED
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def page_path(run_id: str | None, table: str | None) -> str:
    """The dashboard page of what an alert watches."""
    if run_id is not None:
        return f"/runs/{quote(run_id, safe='')}"
    if table is not None:
        return f"/tables/{quote(table, safe='')}"
    return "/alerts"


def generator_url(public_url: str, run_id: str | None, table: str | None) -> str:
    return public_url.rstrip("/") + page_path(run_id, table)


def alert_labels(rule: AlertRule, subject: dict[str, str]) -> dict[str, str]:
    return {
        "alertname": rule.name,
        "kind": rule.kind,
        "severity": rule.severity,
        "rule_id": str(rule.id),
        **subject,
    }


def _body(
    *, status: str, labels: dict[str, str], annotations: dict[str, str], starts: datetime | None,
    ends: datetime | None, fingerprint: str, url: str, endpoint: WebhookEndpoint,
    external_url: str,
) -> dict[str, Any]:  # fmt: skip
    return {
        "version": "4",
        "groupKey": f'{{}}:{{fingerprint="{fingerprint}"}}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": endpoint.name,
        "groupLabels": {"alertname": labels["alertname"]},
        "commonLabels": labels,
        "commonAnnotations": annotations,
        "externalURL": external_url,
        "alerts": [
            {
                "status": status,
                "labels": labels,
                "annotations": annotations,
                "startsAt": _time(starts),
                "endsAt": _time(ends) if status == "resolved" else NOT_ENDED,
                "generatorURL": url,
                "fingerprint": fingerprint,
            }
        ],
    }


def _slack(status: str, labels: dict[str, str], summary: str, url: str) -> dict[str, Any]:
    mark = "RESOLVED" if status == "resolved" else f"FIRING ({labels['severity']})"
    return {"text": f"[{mark}] {labels['alertname']}: {summary} <{url}|Open in Onceover>"}


def _dump(body: dict[str, Any]) -> str:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def transition_body(
    endpoint: WebhookEndpoint, rule: AlertRule, alert: Alert, transition: AlertTransition,
    public_url: str,
) -> str:  # fmt: skip
    url = generator_url(public_url, alert.run_id, alert.table_id)
    if endpoint.format == "slack":
        return _dump(_slack(transition.status, alert.labels, transition.summary, url))
    annotations = {"summary": transition.summary, "description": rule.description or ""}
    if transition.value is not None:
        annotations["value"] = f"{transition.value:g}"
    return _dump(_body(
        status=transition.status, labels=alert.labels, annotations=annotations,
        starts=alert.started_at, ends=alert.ended_at, fingerprint=alert.fingerprint, url=url,
        endpoint=endpoint, external_url=public_url,
    ))  # fmt: skip


def sample_body(endpoint: WebhookEndpoint, public_url: str, now: datetime) -> str:
    labels = {"alertname": TEST_ALERT_NAME, "kind": "test", "severity": "info"}
    summary = f"A test notification from Onceover to endpoint {endpoint.name!r}"
    url = public_url.rstrip("/") + "/alerts"
    if endpoint.format == "slack":
        return _dump(_slack("firing", labels, summary, url))
    return _dump(_body(
        status="firing", labels=labels, annotations={"summary": summary}, starts=now, ends=None,
        fingerprint="0000000000000000", url=url, endpoint=endpoint, external_url=public_url,
    ))  # fmt: skip
