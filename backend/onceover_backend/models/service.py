"""The control plane's own answers: an error, its health, who the caller is."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

HealthStatus = Literal["ok", "error"]


class ErrorPublic(BaseModel):
    """An error answer: a message, or FastAPI's list of ``{loc, msg, type}``."""

    detail: Any


class DependencyHealth(BaseModel):
    """Whether one dependency answered, how fast, and what it is."""

    status: HealthStatus
    target: str = Field(description="What was checked (database URL without password, endpoint)")
    latency_ms: float = Field(description="Time the check took")
    error: str | None = Field(default=None, description="Why the check failed, when it did")
    age_s: float = Field(
        default=0.0,
        description="Seconds since the check ended: answers are shared for ONCEOVER_HEALTH_CACHE_S",
    )


class HealthPublic(BaseModel):
    """``GET /api/health``: ``status`` is ``ok`` only when every dependency is ``ok``."""

    status: Literal["ok", "degraded"]
    version: str
    database: DependencyHealth
    bigquery: DependencyHealth
    unauthenticated_requests: int = Field(
        default=0,
        description="Calls with a body this process refused for want of a valid token since "
        "it started (not audited: anyone can make them)",
    )


class PrincipalPublic(BaseModel):
    """``GET /api/session``: who the token (or the signed-in person) is and what it may do."""

    name: str
    role: str
    may: list[str] = Field(description="the roles this token's role includes")
    signed_in_with: Literal["token", "sso"] = "token"
    csrf_token: str | None = Field(
        default=None,
        description="A signed-in session's CSRF token: its writes carry it in X-CSRF-Token",
    )


class AuthConfigPublic(BaseModel):
    """``GET /auth/config``: whether the dashboard offers single sign-on, and by whom."""

    sso: bool
    provider: str | None = None
    login_path: str | None = Field(default=None, description="where the sign-in starts")
