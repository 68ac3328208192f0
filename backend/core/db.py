"""The database engine, built from :class:`~backend.core.config.Settings`."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine
from sqlalchemy.engine import make_url
from sqlmodel import create_engine


def build_engine(database_url: str) -> Engine:
    """An engine for ``database_url``; a SQLite file's directory is created if missing."""
    url = make_url(database_url)
    connect_args: dict[str, object] = {}
    if url.get_backend_name() == "sqlite":
        if url.database and url.database != ":memory:":
            Path(url.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        # Requests run on a thread pool; SQLite connections may be used across threads.
        connect_args["check_same_thread"] = False
    elif url.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = 5  # seconds; an unreachable server fails fast
    return create_engine(url, connect_args=connect_args, pool_pre_ping=True)
