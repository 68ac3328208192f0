"""Stored checks as the API shows them: one, a page of them, and a line of one for the
audit log and the logs."""

from __future__ import annotations

from sqlmodel import Session, col, select

from onceover_backend.errors import NotFoundError
from onceover_backend.models import ReconciliationPublic, ReconciliationsPublic
from onceover_backend.services.paging import page
from onceover_backend.tables import Reconciliation, Run


def public(record: Reconciliation) -> ReconciliationPublic:
    assert record.id is not None  # stored
    fields = record.model_dump()
    fields["table"] = fields.pop("table_id")
    fields["key"] = fields.pop("key_column")
    fields["mismatched_batches"] = [b["batch_id"] for b in record.batches if b["status"] != "ok"]
    return ReconciliationPublic.model_validate(fields)


def list_reconciliations(
    session: Session,
    *,
    run_id: str | None = None,
    table: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> ReconciliationsPublic:
    """Newest first: a run's checks, or a table's whole-table checks."""
    query = select(Reconciliation)
    if run_id is not None:
        if session.get(Run, run_id) is None:
            raise NotFoundError(f"no run {run_id!r}")
        query = query.where(Reconciliation.run_id == run_id)
    if table is not None:
        query = query.where(Reconciliation.table_id == table, Reconciliation.scope == "table")
    records, count = page(
        session,
        query,
        [col(Reconciliation.checked_at).desc(), col(Reconciliation.id).desc()],
        limit=limit,
        offset=offset,
    )
    return ReconciliationsPublic(data=[public(r) for r in records], count=count)


def summary(result: ReconciliationPublic) -> str:
    """One line for the audit log and the logs: the verdict and its numbers."""
    if result.status == "error":
        return f"reconciliation error, {result.error}"
    if result.expected_rows is None:  # a change data capture table, checked by key
        parts = [f"found {result.actual_rows or 0:,} rows for {result.distinct_keys or 0:,} keys"]
    else:
        parts = [f"expected {result.expected_rows:,} rows", f"found {result.actual_rows:,}"]
    if result.distinct_keys is not None and result.expected_rows is not None:
        parts.append(f"{result.distinct_keys:,} distinct keys")
    if result.duplicate_key_count:
        parts.append(f"{result.duplicate_key_count:,} keys duplicated")
    if result.missing_rows:
        parts.append(f"{result.missing_rows:,} missing")
    if result.mismatched_batches:
        parts.append(f"batches differing: {result.mismatched_batches}")
    if result.rows_set_aside or result.dead_letter_table:
        parts.append(f"{result.rows_set_aside or 0:,} set aside")
    if result.rows_redriven:
        parts.append(f"{result.rows_redriven:,} of them re-driven since")
    if result.rows_in_dead_letter_table is not None:
        parts.append(f"{result.rows_in_dead_letter_table:,} in the dead-letter table")
    return f"reconciliation {result.status}, " + ", ".join(parts)
