"""What the runs and tables lists show beside each entry: the latest reconciliation's
verdict. (Their retry-code counts are the runs' own columns.)"""

from __future__ import annotations

from typing import Literal

from sqlmodel import Session, col, func, select

from onceover_backend.models import VerdictPublic
from onceover_backend.tables import Reconciliation


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
