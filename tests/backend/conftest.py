"""Backend fixtures: each test gets its own database (SQLite file or PostgreSQL
database), upgraded with the real migrations, and an app with one token per role."""

from __future__ import annotations

from collections.abc import Iterator
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

INGEST = "ingest-token-0123456789"
VIEWER = "viewer-token-0123456789"
OPERATOR = "operator-token-0123456789"
TOKENS = f"ingest:{INGEST},viewer:{VIEWER},operator:{OPERATOR}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database of this test's own, upgraded to the migrations' head."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'onceover.db'}"
    else:
        url = request.getfixturevalue("postgres_url")
    upgrade_to_head(url)
    return url


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
