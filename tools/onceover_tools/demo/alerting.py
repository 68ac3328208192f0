"""The demo's alerts: rules that each match one of its runs, and a webhook endpoint on
the demo's own receiver, watched until every firing alert's delivery succeeded."""

from __future__ import annotations

import threading
from typing import Any

from onceover_tools.demo.control_plane import ControlPlane
from onceover_tools.demo.receiver import WebhookReceiver
from onceover_tools.demo.waiting import poll

DELIVERY_TIMEOUT_S = 60.0
"""The evaluator runs every second in the demo; a delivery is sent within a second more."""

RULES: tuple[dict[str, Any], ...] = (
    {"name": "A run failed", "kind": "run_failed", "severity": "critical",
     "description": "The crashed run: resume it from its page and this resolves."},
    {"name": "OUT_OF_RANGE seen", "kind": "out_of_range", "severity": "warning",
     "description": "A gap in a stream's offsets: the run under faults had one."},
    {"name": "Duplicates in a table", "kind": "reconciliation", "severity": "critical",
     "params": {"duplicates_only": True},
     "description": "The tampered table: a row was copied behind the load's back."},
)  # fmt: skip


def alerts_delivered(api: ControlPlane, receiver: WebhookReceiver, stop: threading.Event) -> str:
    """Make the endpoint and the rules, then wait for one succeeded delivery per rule."""
    endpoint = api.call(
        "POST", "/api/webhooks", json={"name": "Demo receiver", "url": receiver.url}
    )
    for rule in RULES:
        api.call("POST", "/api/alert-rules", json=rule)

    def delivered() -> list[dict[str, Any]] | None:
        listed = api.call("GET", f"/api/webhooks/{endpoint['id']}/deliveries")["data"]
        done = [d for d in listed if d["kind"] == "alert" and d["status"] == "succeeded"]
        return done if len(done) >= len(RULES) else None

    deliveries = poll(
        f"{len(RULES)} alert deliveries succeeding", delivered, DELIVERY_TIMEOUT_S, stop
    )
    received = receiver.received
    signed = sum(delivery.signed_with(endpoint["secret"]) for delivery in received)
    return (
        f"{len(RULES)} rules fired; {len(deliveries)} deliveries succeeded; the receiver "
        f"at {receiver.url} got {len(received)}, {signed} with a valid signature"
    )
