"""``/api/session``: who a token is, so the dashboard shows only what it may do."""

from __future__ import annotations

from fastapi import APIRouter

from onceover_backend.api.deps import AnyRoleDep
from onceover_backend.core.security import GRANTS
from onceover_backend.models import PrincipalPublic

router = APIRouter(prefix="/session", tags=["session"])


@router.get("", operation_id="getSession", response_model=PrincipalPublic)
def get_session(*, principal: AnyRoleDep) -> PrincipalPublic:
    """The token's (or signed-in person's) name and role, the roles that role includes,
    and for a signed-in session the CSRF token its writes must carry."""
    return PrincipalPublic(
        name=principal.name,
        role=principal.role,
        may=sorted(GRANTS.get(principal.role, frozenset())),
        signed_in_with="sso" if principal.csrf_token else "token",
        csrf_token=principal.csrf_token,
    )
