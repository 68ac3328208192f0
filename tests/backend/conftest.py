"""Backend fixtures: each test gets its own database (SQLite file or PostgreSQL
database), upgraded with the real migrations, and an app with one token per role."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.db import build_engine
from onceover_backend.core.migrate import upgrade_to_head
from onceover_backend.main import create_app
from sqlalchemy import Engine

from onceover.bigquery import BigQueryConfig
from tests.conftest import database_name, own_postgres_database

INGEST = "ingest-token-0123456789"
VIEWER = "viewer-token-0123456789"
OPERATOR = "operator-token-0123456789"
TOKENS = f"ingest:{INGEST},viewer:{VIEWER},operator:{OPERATOR}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database upgraded to the migrations' head once per test process, for
    each test to copy (running the migrations for each test cost several times a copy;
    tests/backend/test_migrations.py runs them on databases of its own)."""
    path = tmp_path_factory.mktemp("migrated") / "onceover.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def migrated_postgres() -> Iterator[str]:
    """The same on PostgreSQL: the name of a database upgraded to head, a template."""
    with own_postgres_database() as url:
        upgrade_to_head(url)  # its engine is disposed: a template must have no session
        yield database_name(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of this test's own, as the migrations leave an empty one: a copy of
    the process's migrated database."""
    if request.param == "sqlite":
        path = tmp_path / "onceover.db"
        template: Path = request.getfixturevalue("migrated_sqlite")
        with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as copy:
            source.backup(copy)  # the log's pages too, whatever a checkpoint left
        yield f"sqlite:///{path}"
    else:
        with own_postgres_database(template=request.getfixturevalue("migrated_postgres")) as url:
            yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = build_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return Settings(
        database_url=database_url,
        tokens=TOKENS,
        frontend_dist=tmp_path / "no-dashboard",
        stall_check_interval_s=3600,  # tests sweep by calling mark_stalled themselves
        auto_resume_interval_s=3600,  # and call resume_due themselves
        alert_eval_interval_s=3600,  # and evaluate alerts themselves (with their own clock)
        change_poll_s=0.5,
        # Checks BigQuery after each run that succeeds: tests/backend/test_reconciliation.py
        # turns it on against the local BigQuery; elsewhere there is no BigQuery to ask.
        reconcile_on_success=False,
    )


@pytest.fixture
def app(settings: Settings) -> FastAPI:
    # BigQuery is not asked by these tests (only /api/health would); an unused config.
    return create_app(settings, bigquery=BigQueryConfig())


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as client:
        yield client
