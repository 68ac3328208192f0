"""The migrations build exactly the models' tables, on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect
from sqlmodel import SQLModel

import backend.tables  # noqa: F401  (the models, registered on SQLModel.metadata)
from backend.core.db import build_engine
from backend.core.migrate import alembic_config, upgrade_to_head


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fresh.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url


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
