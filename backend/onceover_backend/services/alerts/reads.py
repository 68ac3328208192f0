"""Reading alerts: their current state and their history of notifications."""

from __future__ import annotations

from sqlmodel import Session, col, select

from onceover_backend.errors import NotFoundError
from onceover_backend.models import (
    AlertDetailPublic,
    AlertHistoryPublic,
    AlertPublic,
    AlertsPublic,
    AlertTransitionPublic,
)
from onceover_backend.services.paging import page
from onceover_backend.services.webhooks.payloads import generator_url
from onceover_backend.tables import Alert, AlertTransition

SHOWN_STATES = ("pending", "firing", "resolved")


def _public(alert: Alert, dashboard_url: str) -> AlertPublic:
    assert alert.id is not None
    return AlertPublic(
        id=alert.id, rule_id=alert.rule_id, fingerprint=alert.fingerprint, labels=alert.labels,
        run_id=alert.run_id, table=alert.table_id, state=alert.state,
        value=alert.value, summary=alert.summary, pending_since=alert.pending_since,
        started_at=alert.started_at, ended_at=alert.ended_at,
        last_notified_at=alert.last_notified_at, evaluated_at=alert.evaluated_at,
        generator_url=generator_url(dashboard_url, alert.run_id, alert.table_id),
    )  # fmt: skip


def _transition(row: AlertTransition, alert: Alert) -> AlertTransitionPublic:
    assert row.id is not None
    return AlertTransitionPublic(
        id=row.id, alert_id=row.alert_id, number=row.number,
        status=row.status,
        repeat=row.repeat, at=row.at, value=row.value, summary=row.summary,
        fingerprint=alert.fingerprint, labels=alert.labels,
    )  # fmt: skip


def list_alerts(
    session: Session, dashboard_url: str, *, state: list[str] | None, rule_id: int | None,
    run_id: str | None, limit: int, offset: int,
) -> AlertsPublic:  # fmt: skip
    """Firing first, then pending, then resolved; newest first within each."""
    query = select(Alert).where(col(Alert.state).in_(state or SHOWN_STATES))
    if rule_id is not None:
        query = query.where(Alert.rule_id == rule_id)
    if run_id is not None:
        query = query.where(Alert.run_id == run_id)
    order = [
        (col(Alert.state) == "firing").desc(),
        (col(Alert.state) == "pending").desc(),
        col(Alert.evaluated_at).desc(),
        col(Alert.id).desc(),
    ]
    rows, count = page(session, query, order, limit=limit, offset=offset)
    return AlertsPublic(data=[_public(row, dashboard_url) for row in rows], count=count)


def history(
    session: Session, *, rule_id: int | None, run_id: str | None, fingerprint: str | None,
    limit: int, offset: int,
) -> AlertHistoryPublic:  # fmt: skip
    """Every firing, repeat and resolution, newest first."""
    query = select(AlertTransition).join(Alert, col(Alert.id) == col(AlertTransition.alert_id))
    if rule_id is not None:
        query = query.where(Alert.rule_id == rule_id)
    if run_id is not None:
        query = query.where(Alert.run_id == run_id)
    if fingerprint is not None:
        query = query.where(Alert.fingerprint == fingerprint)
    rows, count = page(
        session, query, [col(AlertTransition.at).desc(), col(AlertTransition.id).desc()],
        limit=limit, offset=offset,
    )  # fmt: skip
    ids = {row.alert_id for row in rows}
    of = {a.id: a for a in session.exec(select(Alert).where(col(Alert.id).in_(ids)))}
    return AlertHistoryPublic(data=[_transition(t, of[t.alert_id]) for t in rows], count=count)


def get_alert(session: Session, dashboard_url: str, alert_id: int) -> AlertDetailPublic:
    alert = session.get(Alert, alert_id)
    if alert is None:
        raise NotFoundError(f"no alert {alert_id}")
    transitions = session.exec(
        select(AlertTransition)
        .where(AlertTransition.alert_id == alert_id)
        .order_by(col(AlertTransition.number).desc())
    )
    return AlertDetailPublic(
        **_public(alert, dashboard_url).model_dump(),
        history=[_transition(row, alert) for row in transitions],
    )
