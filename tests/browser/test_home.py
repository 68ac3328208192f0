"""The dashboard's first page, served by the backend, in a real browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from onceover_tools.stack import BackendProcess
from playwright.sync_api import Page, expect

from onceover.bigquery import BigQueryConfig
from onceover.preflight import free_port
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.browser


def _backend(tmp_path: Path, bigquery: BigQueryConfig) -> BackendProcess:
    assert (REPO_ROOT / "frontend" / "dist" / "index.html").is_file(), "run `make frontend` first"
    return BackendProcess(
        database_url=f"sqlite:///{tmp_path / 'onceover.db'}",
        bigquery=bigquery,
        log_path=tmp_path / "backend.log",
    )


@pytest.fixture
def backend(tmp_path: Path, bq_config: BigQueryConfig) -> Iterator[BackendProcess]:
    with _backend(tmp_path, bq_config) as running:
        yield running


def test_the_home_page_shows_both_dependencies_ok(page: Page, backend: BackendProcess) -> None:
    page.goto(f"{backend.url}/")

    expect(page.get_by_role("heading", name="Onceover")).to_be_visible()
    health = page.get_by_role("region", name="System health")
    expect(health.get_by_test_id("health-status")).to_contain_text("ok")
    expect(health.get_by_test_id("health-database")).to_contain_text("ok")
    expect(health.get_by_test_id("health-database")).to_contain_text("sqlite:///")
    expect(health.get_by_test_id("health-bigquery")).to_contain_text("ok")
    expect(health.get_by_test_id("health-bigquery")).to_contain_text("local BigQuery REST")


def test_an_unreachable_bigquery_is_shown_with_its_reason(page: Page, tmp_path: Path) -> None:
    nothing = free_port()
    down = BigQueryConfig(
        rest_endpoint=f"http://127.0.0.1:{nothing}", grpc_endpoint=f"127.0.0.1:{nothing}"
    )
    with _backend(tmp_path, down) as backend:
        page.goto(f"{backend.url}/")

        health = page.get_by_role("region", name="System health")
        expect(health.get_by_test_id("health-status")).to_contain_text("degraded", timeout=20_000)
        expect(health.get_by_test_id("health-bigquery")).to_contain_text("error")
        expect(health.get_by_test_id("health-bigquery")).to_contain_text("Connection refused")
        expect(health.get_by_test_id("health-database")).to_contain_text("ok")
