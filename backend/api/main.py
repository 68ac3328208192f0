"""Every API router, gathered under ``/api``."""

from fastapi import APIRouter

from backend.api.routes import audit, changes, events, health, metrics, runs

api_router = APIRouter(prefix="/api")
api_router.include_router(health.router)
api_router.include_router(events.router)
api_router.include_router(runs.router)
api_router.include_router(metrics.router)
api_router.include_router(changes.router)
api_router.include_router(audit.router)
