"""The SQL statements an engine sends while a block runs, for tests that count them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """Each statement ``engine`` sends inside the block, in order; SQLite's explicit
    ``BEGIN`` (db.py begins its transactions itself) is left out."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.strip().upper() != "BEGIN":
            seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)
