"""API models of the control plane (request and response bodies)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

HealthStatus = Literal["ok", "error"]


class DependencyHealth(BaseModel):
    """Whether one dependency answered, how fast, and what it is."""

    status: HealthStatus
    target: str = Field(description="What was checked (database URL without password, endpoint)")
    latency_ms: float = Field(description="Time the check took")
    error: str | None = Field(default=None, description="Why the check failed, when it did")


class HealthPublic(BaseModel):
    """``GET /api/health``: ``status`` is ``ok`` only when every dependency is ``ok``."""

    status: Literal["ok", "degraded"]
    version: str
    database: DependencyHealth
    bigquery: DependencyHealth
