"""The audit log: one row per mutating call, whatever its outcome."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session, col, func, select

from backend.core.db import write_transaction
from backend.tables import AuditLog

# The largest OFFSET both databases take (a signed 64-bit integer): the schema allows any
# offset >= 0, and a larger one was a 500 (found by tests/backend/test_schemathesis.py).
# No table holds that many rows, so the page is empty either way.
MAX_OFFSET = 2**63 - 1


def record(engine: Engine, entry: AuditLog) -> None:
    with write_transaction(engine) as session:
        session.add(entry)


def list_entries(
    session: Session,
    *,
    actor: str | None = None,
    action: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
) -> tuple[list[AuditLog], int]:
    """Newest first, with the total count before paging."""
    query = select(AuditLog)
    if actor is not None:
        query = query.where(AuditLog.actor == actor)
    if action is not None:
        query = query.where(AuditLog.action == action)
    if since is not None:
        query = query.where(col(AuditLog.time) >= since)
    if until is not None:
        query = query.where(col(AuditLog.time) < until)
    count = session.exec(select(func.count()).select_from(query.subquery())).one()
    rows = session.exec(
        query.order_by(col(AuditLog.time).desc(), col(AuditLog.id).desc())
        .offset(min(offset, MAX_OFFSET))
        .limit(limit)
    )
    return list(rows), int(count)
