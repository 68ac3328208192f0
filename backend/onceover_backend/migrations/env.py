"""Alembic environment: the models' metadata, the URL from the backend's Settings."""

from __future__ import annotations

from logging.config import fileConfig
from typing import Any, Literal

from alembic import context
from onceover_backend.core.config import get_settings
from onceover_backend.core.db import build_engine
from sqlmodel import SQLModel

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name)

import onceover_backend.tables  # noqa: E402,F401  (registers the tables on SQLModel.metadata)
from onceover_backend.core.types import UTCDateTime  # noqa: E402

target_metadata = SQLModel.metadata


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    # Migrations stand alone: the app's UTC-aware type is a timezone-aware DateTime on disk.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def database_url() -> str:
    # A caller (a test, `onceover db upgrade`) may pass the URL; else Settings decide.
    url: str | None = config.attributes.get("database_url")
    return url or get_settings().database_url


def run_migrations_offline() -> None:
    context.configure(
        url=database_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
        render_as_batch=True,
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = build_engine(database_url())
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            compare_type=True,
            render_item=render_item,
            # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
            render_as_batch=True,
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
