"""The database engine and transactions, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import make_url
from sqlmodel import Session, create_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000
SQLITE_CACHE_KIB = 32 * 1024
"""Page cache of each connection (SQLite's default: 2 MiB)."""
SQLITE_MMAP_BYTES = 2**31 - 2**16
"""The most of the database file SQLite maps (its compiled-in ceiling)."""
SQLITE_CHECKPOINT_BYTES = 64 * 2**20
"""How much the write-ahead log gathers before a commit copies it into the database
file, and what the log is cut back to after (SQLite's default: 1,000 pages, 4 MiB,
and never cut back)."""


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
    engine = create_engine(url, connect_args=connect_args, pool_pre_ping=True)
    if url.get_backend_name() == "sqlite":
        _configure_sqlite(engine, in_memory=not url.database or url.database == ":memory:")
    return engine


def _configure_sqlite(engine: Engine, *, in_memory: bool) -> None:
    """WAL (readers never wait for the writer), a busy timeout instead of "database is
    locked", and transactions this module begins itself so writers can ask for
    ``BEGIN IMMEDIATE``: two writers that both started as readers would otherwise
    deadlock on the upgrade to a write lock."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # pysqlite: no implicit BEGIN
        cursor = dbapi_connection.cursor()
        if not in_memory:
            cursor.execute("PRAGMA journal_mode=WAL")
            # A checkpoint copies each page the log holds into the file once, however
            # many commits wrote it since the last (the id index's leaves, the runs'
            # and batches' rows, the rollups), so fewer, larger checkpoints copy less:
            # every 64 MiB rather than SQLite's 4 (docs/journal/profiling.md, "The write-ahead
            # log copied every 64 MiB"; over HTTP the server's CPU decides). The log is
            # then cut back to that size, where SQLite would keep its largest for good
            # (a reader that never pauses lets it grow).
            page_size = cursor.execute("PRAGMA page_size").fetchone()[0]
            cursor.execute(f"PRAGMA wal_autocheckpoint={SQLITE_CHECKPOINT_BYTES // page_size}")
            cursor.execute(f"PRAGMA journal_size_limit={SQLITE_CHECKPOINT_BYTES}")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        # Ingest looks up and inserts each event's id, a hash, at a random place in its
        # index: with SQLite's 2 MiB default cache, each was a read() of the page from the
        # OS's cache once the index outgrew it. Mapped, a page is a memory access
        # (SQLite caps the map at 2 GiB); cached, the index's upper levels stay in memory
        # (docs/journal/profiling.md, "Third round").
        cursor.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cursor.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        immediate = connection.get_execution_options().get("sqlite_immediate", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


# One writer at a time per SQLite engine, handed over within the process. SQLite's own
# busy handler polls for the write lock with sleeps of up to 100 ms, so writers of one
# server waiting on each other left the database idle between them (docs/journal/profiling.md).
# Writers in other processes still wait on SQLite's lock. Re-entrant, so a nested write
# on one thread behaves as before (SQLite's busy timeout, then an error).
_SQLITE_WRITERS: weakref.WeakKeyDictionary[Engine, threading.RLock] = weakref.WeakKeyDictionary()
_SQLITE_WRITERS_GUARD = threading.Lock()


def _writer_lock(engine: Engine) -> AbstractContextManager[object]:
    if engine.dialect.name != "sqlite":
        return nullcontext()
    with _SQLITE_WRITERS_GUARD:
        lock = _SQLITE_WRITERS.get(engine)
        if lock is None:
            lock = _SQLITE_WRITERS[engine] = threading.RLock()
    return lock


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Session]:
    """A session whose work commits on success and rolls back on any error.

    On SQLite the transaction takes the write lock at its start (``BEGIN IMMEDIATE``),
    after this process's other writers are done; on PostgreSQL callers lock the rows
    they change (``SELECT ... FOR UPDATE``).
    """
    with _writer_lock(engine), engine.connect() as plain:
        connection = plain.execution_options(sqlite_immediate=True)
        with connection.begin(), Session(bind=connection) as session:
            yield session
            session.flush()


def try_advisory_lock(session: Session, key: int) -> bool:
    """On PostgreSQL, take the transaction-scoped advisory lock ``key`` if it is free
    (False: another replica holds it). Elsewhere True: SQLite's write transactions
    already run one at a time."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    got = session.execute(text("SELECT pg_try_advisory_xact_lock(:key)"), {"key": key}).scalar_one()
    return bool(got)
