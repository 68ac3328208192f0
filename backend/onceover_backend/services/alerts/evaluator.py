"""The alert evaluator: each round, every rule's condition is observed and each alert
(one per rule and run, or table) moves through its states:

    (new) ─► pending ─(held `for_s`)─► firing ─(no longer holds)─► resolved
                │                        │  └─ every `repeat_interval_s`: firing again
                └─(cleared first)─► inactive         (resolved/inactive ─► pending again)

A move to ``firing`` or ``resolved`` (and a repeat) is an :class:`AlertTransition`,
and in the same transaction one :class:`WebhookDelivery` per endpoint that wants it:
an outbox, which :mod:`onceover_backend.services.webhooks.dispatch` then sends.

Safe with several replicas on one PostgreSQL: a round runs in one transaction holding
a transaction-scoped advisory lock, and a replica that cannot get it skips the round,
so each transition, and each delivery of it, is made once. On SQLite the round's
transaction takes the write lock (``BEGIN IMMEDIATE``), which serialises rounds the
same way. Rules that are disabled or deleted resolve their firing alerts.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from onceover_backend.core.config import Settings
from onceover_backend.core.db import try_advisory_lock, write_transaction
from onceover_backend.services.alerts.conditions import Observation, observe
from onceover_backend.services.periodic import every
from onceover_backend.services.webhooks import payloads
from onceover_backend.services.webhooks.signing import new_message_id
from onceover_backend.tables import (
    Alert,
    AlertRule,
    AlertTransition,
    WebhookDelivery,
    WebhookEndpoint,
)

logger = logging.getLogger(__name__)

# pg_try_advisory_xact_lock key: the alert evaluator (the stall sweep has ...01).
ADVISORY_LOCK_KEY = 0x6F6E63656F7602
OPEN_STATES = ("pending", "firing")


def fingerprint(rule_id: int, subject: dict[str, str]) -> str:
    """Stable for a rule and what it watches (renaming the rule keeps it)."""
    text_ = json.dumps({"rule_id": rule_id, **subject}, sort_keys=True)
    return hashlib.sha256(text_.encode()).hexdigest()[:16]


def wants(endpoint: WebhookEndpoint, rule: AlertRule, status: str) -> bool:
    """Whether ``endpoint`` is sent ``rule``'s notifications of ``status``."""
    return (
        endpoint.enabled
        and endpoint.deleted_at is None
        and (not endpoint.rule_ids or rule.id in endpoint.rule_ids)
        and (not endpoint.severities or rule.severity in endpoint.severities)
        and (status == "firing" or endpoint.send_resolved)
    )


class _Round:
    """One evaluation, inside one transaction."""

    def __init__(self, session: Session, now: datetime, public_url: str) -> None:
        self.session = session
        self.now = now
        self.public_url = public_url
        self.endpoints = list(
            session.exec(select(WebhookEndpoint).where(col(WebhookEndpoint.deleted_at).is_(None)))
        )
        self.transitions: list[AlertTransition] = []

    def rule(self, rule: AlertRule) -> None:
        assert rule.id is not None
        live = rule.enabled and rule.deleted_at is None
        observed = {
            fingerprint(rule.id, obs.subject()): obs
            for obs in (observe(self.session, rule, self.now) if live else [])
        }
        known = {
            alert.fingerprint: alert
            for alert in self.session.exec(
                select(Alert).where(
                    Alert.rule_id == rule.id,
                    col(Alert.state).in_(OPEN_STATES) | col(Alert.fingerprint).in_(observed),
                )
            )
        }
        for print_, obs in observed.items():
            alert = known.get(print_) or self._new(rule, print_, obs)
            self._holds(rule, alert, obs)
        for print_, alert in known.items():
            if print_ not in observed and alert.state in OPEN_STATES:
                why = "" if live else " (the rule was disabled or deleted)"
                self._cleared(rule, alert, why)

    def _new(self, rule: AlertRule, print_: str, obs: Observation) -> Alert:
        assert rule.id is not None
        alert = Alert(
            rule_id=rule.id, fingerprint=print_, run_id=obs.run_id, table_id=obs.table,
            state="inactive", evaluated_at=self.now,
        )  # fmt: skip
        self.session.add(alert)
        return alert

    def _holds(self, rule: AlertRule, alert: Alert, obs: Observation) -> None:
        alert.labels = payloads.alert_labels(rule, obs.subject())
        alert.value, alert.summary, alert.evaluated_at = obs.value, obs.summary, self.now
        if alert.state in ("inactive", "resolved"):  # a new episode
            alert.state, alert.pending_since = "pending", self.now
            alert.started_at = alert.ended_at = None
        held = self.now - (alert.pending_since or self.now)
        if alert.state == "pending" and held >= timedelta(seconds=rule.for_s):
            alert.state, alert.started_at = "firing", self.now
            self._notify(rule, alert, "firing", obs.summary)
        elif alert.state == "firing" and rule.repeat_interval_s > 0:
            since = self.now - (alert.last_notified_at or self.now)
            if since >= timedelta(seconds=rule.repeat_interval_s):
                self._notify(rule, alert, "firing", obs.summary, repeat=True)

    def _cleared(self, rule: AlertRule, alert: Alert, why: str) -> None:
        alert.evaluated_at = self.now
        if alert.state == "pending":
            alert.state = "inactive"
            return
        alert.state, alert.ended_at = "resolved", self.now
        self._notify(rule, alert, "resolved", f"Resolved{why}: {alert.summary}")

    def _notify(
        self, rule: AlertRule, alert: Alert, status: str, summary: str, *, repeat: bool = False
    ) -> None:
        self.session.flush()  # the alert's id
        assert alert.id is not None
        alert.transitions += 1
        alert.last_notified_at = self.now
        transition = AlertTransition(
            alert_id=alert.id, number=alert.transitions, status=status, repeat=repeat,
            at=self.now, value=alert.value, summary=summary,
        )  # fmt: skip
        self.session.add(transition)
        self.session.flush()
        assert transition.id is not None
        self.transitions.append(transition)
        logger.warning("alert %s %s: %s", alert.fingerprint, status, summary)
        for endpoint in self.endpoints:
            if not wants(endpoint, rule, status):
                continue
            self.session.add(
                WebhookDelivery(
                    endpoint_id=endpoint.id,  # type: ignore[arg-type]
                    message_id=new_message_id(),
                    dedupe_key=f"transition:{transition.id}:endpoint:{endpoint.id}",
                    kind="alert",
                    transition_id=transition.id,
                    event_status=status,
                    body=payloads.transition_body(
                        endpoint, rule, alert, transition, self.public_url
                    ),
                    status="pending",
                    next_attempt_at=self.now,
                    created_at=self.now,
                )
            )


def evaluate(engine: Engine, public_url: str, now: datetime | None = None) -> int | None:
    """One round over every rule: the number of transitions it made, or ``None`` when
    another replica holds the round."""
    now = now or datetime.now(UTC)
    with write_transaction(engine) as session:
        if not try_advisory_lock(session, ADVISORY_LOCK_KEY):
            return None
        round_ = _Round(session, now, public_url)
        # Live rules, and retired ones that still have open alerts to resolve.
        retired_with_open = select(Alert.rule_id).where(col(Alert.state).in_(OPEN_STATES))
        rules = session.exec(
            select(AlertRule)
            .where(
                (col(AlertRule.enabled) & col(AlertRule.deleted_at).is_(None))
                | col(AlertRule.id).in_(retired_with_open)
            )
            .order_by(col(AlertRule.id))
        )
        for rule in list(rules):
            round_.rule(rule)
        return len(round_.transitions)


async def evaluate_forever(engine: Engine, settings: Settings, stop: asyncio.Event) -> None:
    """Evaluate every ``alert_eval_interval_s`` until ``stop`` is set; a failed round
    is logged, and the next one runs as planned."""
    await every(
        settings.alert_eval_interval_s,
        stop,
        lambda: evaluate(engine, settings.dashboard_url()),
        "the alert evaluation",
    )
