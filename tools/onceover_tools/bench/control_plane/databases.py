"""The databases the bench measures: a fresh one per size and kind, and what it holds."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DATABASES = ("sqlite", "postgresql")
POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


@contextmanager
def database(kind: str, tmp: Path, admin_dsn: str) -> Iterator[str]:
    """An empty database's SQLAlchemy URL; a PostgreSQL one is dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / f'bench-{uuid.uuid4().hex[:8]}.db'}"
        return
    import psycopg

    name = f"onceover_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        base = admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stored_and_size(database_url: str) -> tuple[int, float]:
    """The events the database holds and its size in MB (an SQLite file with its WAL)."""
    from onceover_backend.core.db import build_engine
    from onceover_backend.tables import Event
    from sqlalchemy import func, text
    from sqlalchemy.engine import make_url
    from sqlmodel import Session, select

    engine = build_engine(database_url)
    try:
        with Session(engine) as session:
            stored = int(session.exec(select(func.count()).select_from(Event)).one())
            if engine.dialect.name == "postgresql":
                size = int(session.scalar(text("SELECT pg_database_size(current_database())")))
            else:
                path = Path(str(make_url(database_url).database))
                size = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*"))
    finally:
        engine.dispose()
    return stored, size / 1e6
