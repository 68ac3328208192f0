"""Alembic, driven from code: ``onceover serve`` and ``onceover db upgrade`` call this."""

from __future__ import annotations

from alembic import command
from alembic.config import Config

from onceover_backend.core.config import REPO_ROOT


def alembic_config(database_url: str) -> Config:
    config = Config(str(REPO_ROOT / "alembic.ini"))
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False  # the entry point configured logging
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the database's tables to the models' version (creating them if empty)."""
    command.upgrade(alembic_config(database_url), "head")
