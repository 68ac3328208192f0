"""What the runs and tables lists show beside each entry: how many append requests met a
retry code (ALREADY_EXISTS, OUT_OF_RANGE) and the latest reconciliation's verdict."""

from __future__ import annotations

from collections import defaultdict
from typing import Literal

from sqlmodel import Session, col, func, select

from onceover_backend.models import VerdictPublic
from onceover_backend.tables import Reconciliation, WriteRollup

# What an exactly-once writer meets on a retry: deduplication at work, or a gap.
RETRY_CODES = ("ALREADY_EXISTS", "OUT_OF_RANGE")


def retry_code_counts(
    session: Session, by: Literal["run", "table"], ids: list[str]
) -> dict[str, dict[str, int]]:
    """Requests per retry code for each run (or table), from the per-minute rollups;
    keys are the codes in lower case (``already_exists``), as the API names them."""
    counts: dict[str, dict[str, int]] = defaultdict(dict)
    if not ids:
        return counts
    owner = col(WriteRollup.run_id) if by == "run" else col(WriteRollup.table_id)
    rows = session.exec(
        select(owner, WriteRollup.code, func.sum(WriteRollup.requests))
        .where(owner.in_(ids), col(WriteRollup.code).in_(RETRY_CODES))
        .group_by(owner, col(WriteRollup.code))
    )
    for owner_id, code, requests in rows:
        counts[owner_id][code.lower()] = int(requests)
    return counts


def latest_verdicts(
    session: Session, scope: Literal["run", "table"], ids: list[str]
) -> dict[str, VerdictPublic]:
    """The newest reconciliation of each run (or of each whole table), in short."""
    if not ids:
        return {}
    owner = col(Reconciliation.run_id) if scope == "run" else col(Reconciliation.table_id)
    newest = (
        select(owner.label("owner"), func.max(Reconciliation.id).label("id"))
        .where(Reconciliation.scope == scope, owner.in_(ids))
        .group_by(owner)
        .subquery()
    )
    rows = session.exec(
        select(newest.c.owner, Reconciliation).join(newest, col(Reconciliation.id) == newest.c.id)
    )
    return {
        str(owner_id): VerdictPublic.model_validate(record, from_attributes=True)
        for owner_id, record in rows
    }
