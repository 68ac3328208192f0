"""Every API router, gathered under ``/api``."""

from fastapi import APIRouter

from backend.api.routes import health

api_router = APIRouter(prefix="/api")
api_router.include_router(health.router)
