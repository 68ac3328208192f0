"""SQLite's write-ahead log under the engine's settings: gathered in 64 MiB steps
before a commit copies it into the database file, and cut back after a reader let it
grow past that (SQLite's defaults: a copy every 4 MiB, and the log's largest kept)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from onceover_backend.core.db import SQLITE_CHECKPOINT_BYTES, build_engine
from sqlalchemy import Engine

MIB = 2**20


@pytest.fixture
def database(tmp_path: Path) -> Iterator[tuple[Engine, Path]]:
    path = tmp_path / "log.db"
    engine = build_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE blob (data BLOB)")
    try:
        yield engine, path.with_name("log.db-wal")
    finally:
        engine.dispose()


def _write(engine: Engine, mib: int) -> None:
    """``mib`` commits of 1 MiB each."""
    for _ in range(mib):
        with engine.begin() as connection:
            connection.exec_driver_sql("INSERT INTO blob VALUES (randomblob(1048576))")


def test_the_log_gathers_its_checkpoint_size_before_it_is_copied(
    database: tuple[Engine, Path],
) -> None:
    engine, wal = database
    _write(engine, 16)
    # Every 4 MiB, SQLite's default, the log would have been copied and begun again.
    assert wal.stat().st_size > 16 * MIB


def test_a_log_a_reader_let_grow_is_cut_back_to_the_checkpoint_size(
    database: tuple[Engine, Path],
) -> None:
    engine, wal = database
    reader = sqlite3.connect(wal.with_name("log.db"), isolation_level=None)
    try:
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM blob").fetchone()  # holds its snapshot
        _write(engine, SQLITE_CHECKPOINT_BYTES // MIB + 8)
        # No checkpoint could begin the log again while the reader held the file.
        grown = wal.stat().st_size
        assert grown > SQLITE_CHECKPOINT_BYTES
        reader.execute("COMMIT")
    finally:
        reader.close()
    _write(engine, 2)  # the first commit copies the log; the next begins it again
    assert wal.stat().st_size <= SQLITE_CHECKPOINT_BYTES, grown
