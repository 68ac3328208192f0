"""``/api/session``: who a token is, so the dashboard shows only what it may do."""

from __future__ import annotations

from fastapi import APIRouter

from onceover_backend.api.deps import AnyRoleDep
from onceover_backend.core.security import GRANTS
from onceover_backend.models import PrincipalPublic

router = APIRouter(prefix="/session", tags=["session"])


@router.get("", operation_id="getSession", response_model=PrincipalPublic)
def get_session(*, principal: AnyRoleDep) -> PrincipalPublic:
    """The token's name and role, and the roles that role includes."""
    return PrincipalPublic(
        name=principal.name,
        role=principal.role,
        may=sorted(GRANTS.get(principal.role, frozenset())),
    )
