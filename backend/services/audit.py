"""The audit log: one row per mutating call, whatever its outcome."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine
from sqlmodel import Session, col, select

from backend.core.db import write_transaction
from backend.services.paging import page
from backend.tables import AuditLog


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
    return page(
        session, query, [col(AuditLog.time).desc(), col(AuditLog.id).desc()],
        limit=limit, offset=offset,
    )  # fmt: skip
