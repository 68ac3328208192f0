"""Every API router, gathered under ``/api``."""

from typing import Any

from fastapi import APIRouter

from onceover_backend.api.routes import (
    alerts,
    audit,
    changes,
    events,
    health,
    metrics,
    overview,
    reconciliations,
    redrive,
    resume,
    runs,
    session,
    tables,
    webhooks,
)
from onceover_backend.models import ErrorPublic

# Every router but health checks a bearer token (backend/onceover_backend/api/deps.py).
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorPublic, "description": "No bearer token, or one nobody issued"},
    403: {"model": ErrorPublic, "description": "The token's role may not do this"},
}

api_router = APIRouter(prefix="/api")
api_router.include_router(health.router)
for guarded in (
    session,
    events,
    runs,
    tables,
    overview,
    resume,
    redrive,
    reconciliations,
    metrics,
    changes,
    audit,
    alerts,
    webhooks,
):
    api_router.include_router(guarded.router, responses=AUTH_RESPONSES)
