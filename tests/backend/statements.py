"""The SQL statements an engine sends while a block runs, for tests that count them or
ask the database how it runs them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, event


@dataclass(frozen=True)
class Sent:
    sql: str
    parameters: Any


@contextmanager
def statements(engine: Engine) -> Iterator[list[Sent]]:
    """Each statement ``engine`` sends inside the block, in order; SQLite's explicit
    ``BEGIN`` (db.py begins its transactions itself) is left out."""
    seen: list[Sent] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        if statement.strip().upper() != "BEGIN":
            seen.append(Sent(statement, parameters))

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)
