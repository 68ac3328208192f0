"""Retention: what is older than its ``ONCEOVER_RETENTION_*`` setting is deleted, a chunk
of rows per transaction, so neither database is held for long.

What goes (a setting of 0 keeps its rows forever):

* ``event``: raw events received before the cutoff. Nothing the API shows is read from
  them; they let ingest recognise an event sent twice, so one sent again after its
  retention is stored (and counted) again.
* ``writerollup``: minutes before the cutoff (settings refuse less than the dashboard's
  longest range); ``hourrollup``: hours that ended before it. A run keeps its own
  ALREADY_EXISTS and OUT_OF_RANGE counts, which the lists show.
* ``auditlog``: rows written before the cutoff.
* ``webhookdelivery``: deliveries that succeeded or failed before the cutoff, with their
  tries (``deliveryattempt``). Pending and sending ones stay whatever their age.

Never deleted: runs, attempts, batches and streams (a run's state, which reconciliation
reads), reconciliations, launches, alert rules, alerts and their transitions, webhook
endpoints and tokens.

Events go in arrival order (``seq``): each chunk is the first ``chunk`` events, and the
sweep stops after one that holds an event received after the cutoff. So a chunk reads
through the primary key only, and the event table (the largest, and the hottest to
insert into) needs no index on a time column; an old event behind a younger one (the
replicas' clocks differ a little) goes once that one is old too. Rollups are dated by
the jobs' clocks, which may be anything, so they are chosen by their minute.

Several replicas may sweep at once: deleting a row another replica deleted deletes none.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from sqlalchemy import ColumnElement, CursorResult, Delete, Engine, delete
from sqlmodel import Session, col, select

from onceover_backend.core.config import Settings
from onceover_backend.core.db import write_transaction
from onceover_backend.services.access import audit
from onceover_backend.services.periodic import every
from onceover_backend.tables import (
    AuditLog,
    DeliveryAttempt,
    Event,
    HourRollup,
    WebhookDelivery,
    WriteRollup,
)

logger = logging.getLogger(__name__)

CHUNK_ROWS = 5000
"""Rows deleted per transaction."""
CHUNK_PAUSE_S = 0.02
"""Between two chunks: lets a writer waiting for SQLite's write lock in."""

FINISHED = ("succeeded", "failed")


@dataclass(frozen=True)
class Retention:
    """Days each kind of row is kept; 0 keeps it forever."""

    events_days: int
    rollups_days: int
    audit_days: int
    deliveries_days: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Retention:
        return cls(
            events_days=settings.retention_events_days,
            rollups_days=settings.retention_rollups_days,
            audit_days=settings.retention_audit_days,
            deliveries_days=settings.retention_deliveries_days,
        )


@dataclass
class Swept:
    """What one sweep deleted, per kind, and the cutoffs it used (``None``: kept forever)."""

    removed: dict[str, int]
    cutoffs: dict[str, datetime | None]

    def summary(self) -> str:
        parts = [
            f"{n} {WHAT[kind]} before {cutoff:%Y-%m-%d %H:%M} UTC"
            for kind, n in self.removed.items()
            if n and (cutoff := self.cutoffs[kind]) is not None
        ]
        return "removed " + ", ".join(parts) if parts else "nothing to remove"


def _delete(session: Session, statement: Delete) -> int:
    done = session.execute(statement.execution_options(synchronize_session=False))
    return int(cast(CursorResult[Any], done).rowcount)


def _events(session: Session, cutoff: datetime, chunk: int) -> tuple[int, bool]:
    front = session.exec(
        select(Event.seq, Event.received_at).order_by(col(Event.seq)).limit(chunk)
    ).all()
    if not front:
        return 0, False
    young = any(received_at >= cutoff for _, received_at in front)
    removed = _delete(
        session,
        delete(Event).where(col(Event.seq) <= front[-1][0], col(Event.received_at) < cutoff),
    )
    return removed, not young and len(front) == chunk


def _oldest(key: Any, condition: ColumnElement[bool], chunk: int) -> Any:
    """The first ``chunk`` keys of rows matching ``condition``, as a subquery."""
    return select(key).where(condition).order_by(key).limit(chunk)


def _rollups(session: Session, cutoff: datetime, chunk: int) -> tuple[int, bool]:
    key = col(WriteRollup.id)
    chosen = _oldest(key, col(WriteRollup.minute) < cutoff, chunk)
    removed = _delete(session, delete(WriteRollup).where(key.in_(chosen)))
    return removed, removed == chunk


def _hour_rollups(session: Session, cutoff: datetime, chunk: int) -> tuple[int, bool]:
    key = col(HourRollup.id)
    ended = col(HourRollup.hour) <= cutoff - timedelta(hours=1)  # the whole hour before it
    removed = _delete(session, delete(HourRollup).where(key.in_(_oldest(key, ended, chunk))))
    return removed, removed == chunk


def _audit(session: Session, cutoff: datetime, chunk: int) -> tuple[int, bool]:
    key = col(AuditLog.id)
    chosen = _oldest(key, col(AuditLog.time) < cutoff, chunk)
    removed = _delete(session, delete(AuditLog).where(key.in_(chosen)))
    return removed, removed == chunk


def _deliveries(session: Session, cutoff: datetime, chunk: int) -> tuple[int, bool]:
    # Finished deliveries never change again, so both statements choose the same ones.
    key = col(WebhookDelivery.id)
    finished = col(WebhookDelivery.status).in_(FINISHED) & (
        col(WebhookDelivery.finished_at) < cutoff
    )
    chosen = _oldest(key, finished, chunk)
    _delete(session, delete(DeliveryAttempt).where(col(DeliveryAttempt.delivery_id).in_(chosen)))
    removed = _delete(session, delete(WebhookDelivery).where(key.in_(chosen)))
    return removed, removed == chunk


WHAT = {
    "events": "events received",
    "rollups": "rollup rows of minutes",
    "hour_rollups": "rollup rows of hours ended",
    "audit": "audit rows written",
    "deliveries": "webhook deliveries finished",
}


def sweep(
    engine: Engine,
    retention: Retention,
    now: datetime | None = None,
    *,
    chunk: int = CHUNK_ROWS,
    pause_s: float = CHUNK_PAUSE_S,
    keep_going: Callable[[], bool] = lambda: True,
) -> Swept:
    """Delete what is past retention, ``chunk`` rows per transaction, until nothing is
    left or ``keep_going`` says stop (checked between chunks); what went, per kind."""
    now = now or datetime.now(UTC)
    swept = Swept(removed=dict.fromkeys(WHAT, 0), cutoffs=dict.fromkeys(WHAT))
    steps: list[tuple[str, int, Callable[[Session, datetime, int], tuple[int, bool]]]] = [
        ("events", retention.events_days, _events),
        ("rollups", retention.rollups_days, _rollups),
        ("hour_rollups", retention.rollups_days, _hour_rollups),
        ("audit", retention.audit_days, _audit),
        ("deliveries", retention.deliveries_days, _deliveries),
    ]
    for kind, days, step in steps:
        if not days:
            continue
        cutoff = swept.cutoffs[kind] = now - timedelta(days=days)
        more = True
        while more and keep_going():
            with write_transaction(engine) as session:
                removed, more = step(session, cutoff, chunk)
            swept.removed[kind] += removed
            if more and pause_s:
                time.sleep(pause_s)
    return swept


def sweep_and_record(engine: Engine, retention: Retention, **options: Any) -> Swept:
    """One round of the periodic sweep: :func:`sweep`, then, if it deleted anything, a
    log line and an audit row saying what (operators read it in ``/api/audit``)."""
    swept = sweep(engine, retention, **options)
    summary = swept.summary()
    if any(swept.removed.values()):
        logger.info("retention: %s", summary)
        audit.record(
            engine,
            AuditLog(
                actor=audit.SYSTEM_ACTOR,
                action="sweepRetention",
                method="SWEEP",
                path="ONCEOVER_RETENTION_*",
                target=", ".join(kind for kind, n in swept.removed.items() if n),
                request_id="-",
                status_code=0,
                outcome=f"ok: {summary}",
            ),
        )
    else:
        logger.debug("retention: %s", summary)
    return swept


async def retention_forever(engine: Engine, settings: Settings, stop: asyncio.Event) -> None:
    """Sweep every ``retention_interval_s`` until ``stop`` is set (a sweep under way stops
    after its current chunk); a failed round is logged, and the next one runs as planned."""
    retention = Retention.from_settings(settings)
    if not any(astuple(retention)):
        return  # everything is kept forever
    await every(
        settings.retention_interval_s,
        stop,
        lambda: sweep_and_record(engine, retention, keep_going=lambda: not stop.is_set()),
        "the retention sweep",
    )
