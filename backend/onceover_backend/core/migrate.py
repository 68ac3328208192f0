"""Alembic, driven from code: ``onceover serve`` and ``onceover db upgrade`` call this.

The migrations are part of the package (``onceover_backend/migrations``), so a server
installed from the wheel migrates its database from any folder; no ``alembic.ini`` is
read. A developer's ``alembic`` command line reads the root ``alembic.ini``, which points
at the same folder."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"
FILE_TEMPLATE = "%%(year)d%%(month).2d%%(day).2d_%%(rev)s_%%(slug)s"


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("file_template", FILE_TEMPLATE)
    config.set_main_option("path_separator", "os")
    config.attributes["database_url"] = database_url
    config.attributes["configure_logger"] = False  # the entry point configured logging
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the database's tables to the models' version (creating them if empty)."""
    command.upgrade(alembic_config(database_url), "head")
