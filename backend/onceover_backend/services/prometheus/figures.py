"""What a scrape reads from the database, in a fixed number of queries however many
events are stored: the overview's per-table figures (one definition, the overview's
own), each table's totals over every run (kept on the runs as ingest adds them up, as the
Tables page reads them), runs by status, alerts firing, webhook deliveries, and the
newest stored event. Nothing here reads the events or scans what grows with them but
the hourly rollups of the last 24 hours, as the overview does."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlalchemy import select as select_rows
from sqlmodel import Session, col, select

from onceover_backend.services.reads.overview import TableFigures, Window, table_figures
from onceover_backend.services.reads.table_totals import runs_by_status
from onceover_backend.tables import Alert, AlertRule, Event, Run, WebhookDelivery


@dataclass(frozen=True)
class TableTotals:
    """One table's totals over every run the control plane holds."""

    rows_committed: int = 0
    batches_committed: int = 0
    rows_dead_lettered: int = 0
    already_exists_requests: int = 0
    out_of_range_requests: int = 0
    throttled_requests: int = 0
    rejected_requests: int = 0


@dataclass(frozen=True)
class RuleFiring:
    rule_id: int
    rule: str
    severity: str
    firing: int


@dataclass(frozen=True)
class NewestEvent:
    seq: int
    time: datetime
    received_at: datetime


@dataclass(frozen=True)
class Scrape:
    window: Window
    overview: TableFigures
    totals: dict[str, TableTotals]
    runs: dict[str, dict[str, int]] = field(default_factory=dict)  # table -> status -> runs
    rules: list[RuleFiring] = field(default_factory=list)
    deliveries: dict[str, int] = field(default_factory=dict)  # status -> deliveries
    newest_event: NewestEvent | None = None


def read(session: Session, *, stale_after: timedelta, now: datetime | None = None) -> Scrape:
    window = Window.at(now)
    return Scrape(
        window=window,
        overview=table_figures(session, stale_after=stale_after, window=window),
        totals=_totals(session),
        runs=runs_by_status(session),
        rules=_rules_firing(session),
        deliveries=_deliveries(session),
        newest_event=_newest_event(session),
    )


def _totals(session: Session) -> dict[str, TableTotals]:
    rows = session.execute(
        select_rows(
            col(Run.table_id),
            func.sum(Run.rows_committed),
            func.sum(Run.batches_committed),
            func.sum(Run.rows_dead_lettered),
            func.sum(Run.already_exists_requests),
            func.sum(Run.out_of_range_requests),
            func.sum(Run.throttled_requests),
            func.sum(Run.rejected_requests),
        ).group_by(col(Run.table_id))
    )
    return {
        str(table): TableTotals(*(int(value or 0) for value in values)) for table, *values in rows
    }


def _rules_firing(session: Session) -> list[RuleFiring]:
    """Every rule, with how many of its alerts fire (0 too: an absent series cannot be
    told from a scrape that failed)."""
    firing = (
        select(Alert.rule_id, func.count().label("firing"))
        .where(col(Alert.state) == "firing")
        .group_by(col(Alert.rule_id))
        .subquery()
    )
    rows = session.execute(
        select_rows(
            col(AlertRule.id), col(AlertRule.name), col(AlertRule.severity), firing.c.firing
        )
        .outerjoin(firing, firing.c.rule_id == col(AlertRule.id))
        .where(col(AlertRule.deleted_at).is_(None))
        .order_by(col(AlertRule.id))
    )
    return [
        RuleFiring(rule_id=int(rule_id), rule=str(name), severity=str(severity),
                   firing=int(count or 0))
        for rule_id, name, severity, count in rows
    ]  # fmt: skip


def _deliveries(session: Session) -> dict[str, int]:
    rows = session.exec(
        select(WebhookDelivery.status, func.count()).group_by(col(WebhookDelivery.status))
    )
    return {str(status): int(count) for status, count in rows}


def _newest_event(session: Session) -> NewestEvent | None:
    """The newest stored event, by its sequence number (the primary key's index: one
    row read, however many are stored)."""
    row = session.exec(
        select(Event.seq, Event.time, Event.received_at).order_by(col(Event.seq).desc()).limit(1)
    ).first()
    if row is None or row[0] is None:
        return None
    return NewestEvent(seq=int(row[0]), time=row[1], received_at=row[2])
