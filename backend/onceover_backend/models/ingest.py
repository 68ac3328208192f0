"""``POST /api/events``'s answer."""

from __future__ import annotations

from pydantic import BaseModel, Field


class IngestResultPublic(BaseModel):
    """``POST /api/events``: how many events were new and how many were already stored."""

    received: int
    stored: int
    duplicates: int = Field(description="events whose id was already stored (or repeated)")
    run_ids: list[str] = Field(description="runs the new events belong to")
