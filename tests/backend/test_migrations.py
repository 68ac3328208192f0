"""The migrations build exactly the models' tables, on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import onceover_backend.tables  # noqa: F401  (the models, registered on SQLModel.metadata)
import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from onceover_backend.core.db import build_engine
from onceover_backend.core.migrate import alembic_config, upgrade_to_head
from onceover_backend.tables import Batch, CommitHour, HourRollup, Run, WriteRollup
from sqlalchemy import Connection, inspect, text
from sqlalchemy import select as select_rows
from sqlmodel import Session, SQLModel, col, select


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


def _store_run(connection: Connection, run_id: str, status: str) -> None:
    """A run row with only the columns every revision has, as raw SQL: the models may
    have more than the revision under test."""
    connection.execute(
        text("INSERT INTO run (run_id, table_id, status, started_at, rows_expected, "
             "rows_committed, batches_committed, updated_at) VALUES (:run, 't', :status, "
             "'2026-11-01 12:00:00+00:00', 0, 0, 0, '2026-11-01 12:00:00+00:00')"),
        {"run": run_id, "status": status},
    )  # fmt: skip


def test_upgrading_an_empty_database_matches_the_models(empty_database: str) -> None:
    upgrade_to_head(empty_database)

    engine = build_engine(empty_database)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            drift = compare_metadata(context, SQLModel.metadata)
        tables = set(inspect(engine).get_table_names())
    finally:
        engine.dispose()
    assert drift == [], f"the models and the migrations differ: {drift}"
    assert tables == {*SQLModel.metadata.tables, "alembic_version"}


def test_upgrading_twice_changes_nothing_and_downgrade_removes_everything(
    empty_database: str,
) -> None:
    upgrade_to_head(empty_database)
    upgrade_to_head(empty_database)

    command.downgrade(alembic_config(empty_database), "base")

    engine = build_engine(empty_database)
    try:
        assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    finally:
        engine.dispose()


def test_attempts_stored_before_0003_are_numbered_in_the_order_they_started(
    empty_database: str,
) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0002")
    engine = build_engine(empty_database)
    try:
        with engine.begin() as connection:
            for run in ("r1", "r2"):
                _store_run(connection, run, "failed")
            for run, attempt, minute in (("r1", "late", 9), ("r1", "early", 1), ("r2", "only", 5)):
                connection.execute(
                    text("INSERT INTO attempt (run_id, attempt_id, status, started, started_at) "
                         "VALUES (:run, :attempt, 'failed', true, :at)"),
                    {"run": run, "attempt": attempt, "at": f"2026-11-01 12:0{minute}:00+00:00"},
                )  # fmt: skip

        command.upgrade(config, "head")

        with engine.connect() as connection:
            numbered = connection.execute(
                text("SELECT run_id, attempt_id, number FROM attempt ORDER BY run_id, number")
            ).all()
    finally:
        engine.dispose()
    assert [tuple(row) for row in numbered] == [("r1", "early", 1), ("r1", "late", 2),
                                                ("r2", "only", 1)]  # fmt: skip


def test_runs_and_batches_stored_before_0007_set_nothing_aside(empty_database: str) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0006")
    engine = build_engine(empty_database)
    try:
        with engine.begin() as connection:
            connection.execute(
                text("INSERT INTO run (run_id, table_id, status, started_at, rows_expected, "
                     "rows_committed, batches_committed, updated_at) VALUES ('r1', 'p.d.t', "
                     "'succeeded', '2026-11-01 12:00:00+00:00', 5, 5, 1, "
                     "'2026-11-01 12:00:00+00:00')")
            )  # fmt: skip
            connection.execute(
                text("INSERT INTO batch (run_id, table_id, query_id, batch_id, batch_key, mode, "
                     "state, rows, streams, resolved, stamped, replays, rows_rewritten) VALUES "
                     "('r1', 'p.d.t', 'q', 0, '0', 'pending', 'committed', 5, '[]', false, "
                     "false, 0, 0)")
            )  # fmt: skip

        command.upgrade(config, "head")

        with engine.connect() as connection:
            run = connection.execute(
                text("SELECT rows_dead_lettered, dead_letter_table, rejected_requests, "
                     "rejections FROM run")
            ).one()  # fmt: skip
            batch = connection.execute(
                text("SELECT dead_lettered_rows, dead_letter_table, dead_letter_streams FROM batch")
            ).one()
    finally:
        engine.dispose()
    assert tuple(run[:3]) == (0, None, 0)
    assert run[3] in ("[]", [])  # JSON: text on SQLite, decoded on PostgreSQL
    assert tuple(batch[:2]) == (0, None)
    assert batch[2] in ("[]", [])


def test_rollups_stored_before_0011_become_runs_retry_counts_and_hours(
    empty_database: str,
) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0010")
    engine = build_engine(empty_database)
    # The per-minute rollups have the same columns at 0010 as now.
    minute = WriteRollup.__table__  # type: ignore[attr-defined]

    def at(hour: int, minutes: int) -> datetime:
        return datetime(2026, 11, 1, hour, minutes, tzinfo=UTC)

    try:
        with engine.begin() as connection:
            for run in ("r1", "r2"):
                _store_run(connection, run, "succeeded")
            connection.execute(minute.insert(), [
                {"run_id": run, "minute": when, "table_id": table, "stream_type": kind,
                 "code": code, "requests": requests, "rows": 0, "bytes": 0}
                for run, when, table, kind, code, requests in (
                    ("r1", at(12, 5), "t", "PENDING", "ALREADY_EXISTS", 2),
                    ("r1", at(12, 59), "t", "PENDING", "ALREADY_EXISTS", 3),
                    ("r1", at(13, 1), "t", "PENDING", "ALREADY_EXISTS", 1),
                    ("r1", at(12, 10), "t", "PENDING", "OUT_OF_RANGE", 4),
                    ("r1", at(12, 10), "t", "PENDING", "OK", 100),
                    ("r1", at(12, 10), "t", "BUFFERED", "OK", 50),
                    ("r1", at(12, 30), "t2", "PENDING", "OK", 9),
                    ("r2", at(12, 30), "t", "PENDING", "OK", 7),
                )
            ])  # fmt: skip

        command.upgrade(config, "head")

        with Session(engine) as session:
            runs = session.exec(
                select(Run.run_id, Run.already_exists_requests, Run.out_of_range_requests)
                .order_by(col(Run.run_id))
            ).all()  # fmt: skip
            hours = session.execute(
                select_rows(col(HourRollup.run_id), col(HourRollup.hour),
                            col(HourRollup.table_id), col(HourRollup.code),
                            col(HourRollup.requests))
            ).all()  # fmt: skip
    finally:
        engine.dispose()
    assert [tuple(run) for run in runs] == [("r1", 6, 4), ("r2", 0, 0)]
    assert sorted(tuple(hour) for hour in hours) == [
        ("r1", at(12, 0), "t", "ALREADY_EXISTS", 5),
        ("r1", at(12, 0), "t", "OK", 150),
        ("r1", at(12, 0), "t", "OUT_OF_RANGE", 4),
        ("r1", at(12, 0), "t2", "OK", 9),
        ("r1", at(13, 0), "t", "ALREADY_EXISTS", 1),
        ("r2", at(12, 0), "t", "OK", 7),
    ]


def test_batches_stored_before_0012_become_commits_by_the_hour(empty_database: str) -> None:
    config = alembic_config(empty_database)
    command.upgrade(config, "0011")
    engine = build_engine(empty_database)
    batch = Batch.__table__  # type: ignore[attr-defined]  # the same columns at 0011 as now

    def at(hour: int, minutes: int, seconds: int = 0) -> datetime:
        return datetime(2026, 11, 1, hour, minutes, seconds, 250_000, tzinfo=UTC)

    try:
        with engine.begin() as connection:
            for run in ("r1", "r2"):
                _store_run(connection, run, "succeeded")
            connection.execute(batch.insert(), [
                {"run_id": run, "table_id": table, "query_id": "q", "batch_id": n,
                 "batch_key": str(n), "mode": "pending", "state": state, "rows": rows,
                 "dead_lettered_rows": dead, "committed_at": when}
                for run, table, n, state, rows, dead, when in (
                    ("r1", "t", 0, "committed", 10, 3, at(12, 50)),
                    ("r1", "t", 1, "committed", 5, 0, at(12, 59, 59)),
                    ("r1", "t", 2, "committed", None, 0, at(13, 1)),
                    ("r1", "t", 3, "intent", None, 0, None),
                    ("r1", "t2", 4, "committed", 4, 0, at(12, 5)),
                    ("r2", "t", 0, "committed", 7, 1, at(13, 30)),
                )
            ])  # fmt: skip

        command.upgrade(config, "head")

        with Session(engine) as session:
            hours = session.execute(
                select_rows(col(CommitHour.run_id), col(CommitHour.hour),
                            col(CommitHour.table_id), col(CommitHour.batches),
                            col(CommitHour.rows), col(CommitHour.dead_lettered_rows),
                            col(CommitHour.last_commit_at))
            ).all()  # fmt: skip
    finally:
        engine.dispose()
    assert sorted(tuple(hour) for hour in hours) == [
        ("r1", at(12, 0).replace(microsecond=0), "t", 2, 15, 3, at(12, 59, 59)),
        ("r1", at(12, 0).replace(microsecond=0), "t2", 1, 4, 0, at(12, 5)),
        ("r1", at(13, 0).replace(microsecond=0), "t", 1, 0, 0, at(13, 1)),
        ("r2", at(13, 0).replace(microsecond=0), "t", 1, 7, 1, at(13, 30)),
    ]
