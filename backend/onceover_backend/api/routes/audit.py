"""``/api/audit``: every mutating call, newest first (role ``operator``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from onceover_backend.api.deps import OperatorDep, SessionDep
from onceover_backend.models import AuditEntryPublic, AuditLogPublic, Text, UTCTime
from onceover_backend.services.access import audit

router = APIRouter(prefix="/audit", tags=["audit"])


@router.get("", operation_id="listAudit", response_model=AuditLogPublic)
def list_audit(
    *,
    session: SessionDep,
    _principal: OperatorDep,
    actor: Annotated[Text | None, Query(max_length=200)] = None,
    action: Annotated[Text | None, Query(max_length=100)] = None,
    since: UTCTime | None = None,
    until: UTCTime | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> AuditLogPublic:
    """Who did what, to what, with which request id and outcome."""
    entries, count = audit.list_entries(
        session, actor=actor, action=action, since=since, until=until, limit=limit, offset=offset
    )
    return AuditLogPublic(
        data=[AuditEntryPublic.model_validate(entry.model_dump()) for entry in entries],
        count=count,
    )
