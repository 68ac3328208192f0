"""The audit log: one row per mutating call, whatever its outcome."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Engine, insert
from sqlmodel import Session, col, select

from onceover_backend.core.db import write_transaction
from onceover_backend.services.paging import page
from onceover_backend.tables import AuditLog

SYSTEM_ACTOR = "onceover"
"""Who the control plane's own actions (automatic reconciliations and resumes) are by."""


def record(engine: Engine, entry: AuditLog) -> None:
    with write_transaction(engine) as session:
        session.add(entry)


_INSERT = insert(AuditLog)
_COLUMNS = tuple(name for name in AuditLog.model_fields if name != "id")


def insert_rows(session: Session, entries: Sequence[AuditLog]) -> None:
    """``entries`` inserted on the session's connection, in its transaction, without the
    ORM's flush: ingest writes one a batch, and flushing that one row through the ORM
    was a visible share of the server's CPU at small posts (docs/journal/profiling.md, "What a
    small POST costs, again")."""
    if entries:
        rows = [{name: getattr(entry, name) for name in _COLUMNS} for entry in entries]
        session.connection().execute(_INSERT, rows)


def record_automatic(
    engine: Engine,
    *,
    action: str,
    path: str,
    target: str,
    request_id: str,
    status_code: int,
    outcome: str,
) -> None:
    """An action the control plane took by itself, written as the API call it stands for."""
    record(
        engine,
        AuditLog(
            actor=SYSTEM_ACTOR,
            action=action,
            method="POST",
            path=path,
            target=target,
            request_id=request_id,
            status_code=status_code,
            outcome=outcome,
        ),
    )


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
