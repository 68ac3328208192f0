"""The backend's settings: one object, read from ``ONCEOVER_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DATABASE_URL = "sqlite:///.onceover/onceover.db"


class Settings(BaseSettings):
    """Control-plane configuration. BigQuery is configured apart, in :mod:`onceover.bigquery`."""

    model_config = SettingsConfigDict(env_prefix="ONCEOVER_", extra="ignore")

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL: SQLite file (default) or postgresql+psycopg://...",
    )
    frontend_dist: Path = Field(
        default=REPO_ROOT / "frontend" / "dist",
        description="Directory of the built dashboard served at /",
    )
    health_timeout_s: float = Field(
        default=5.0, gt=0, description="Deadline of each dependency check in /api/health"
    )


@lru_cache
def get_settings() -> Settings:
    return Settings()
