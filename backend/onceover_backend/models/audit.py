"""The audit log's entries."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel


class AuditEntryPublic(BaseModel):
    id: int
    time: AwareDatetime
    actor: str
    subject: str | None = None
    role: str | None
    action: str
    method: str
    path: str
    target: str | None
    request_id: str
    status_code: int
    outcome: str


class AuditLogPublic(BaseModel):
    data: list[AuditEntryPublic]
    count: int
