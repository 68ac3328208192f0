"""The server's interpreter settings last as long as an app runs, and no longer.

The settings themselves were chosen by measurement (docs/journal/profiling.md, "The garbage
collector"); here: that a running app has them, and that the process gets back what it
had when the app stops, also when two apps overlap without nesting.
"""

from __future__ import annotations

import gc
import sys

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.core.config import Settings
from onceover_backend.core.interpreter import GIL_SWITCH_INTERVAL_S, YOUNG_COLLECTION_THRESHOLD
from onceover_backend.main import create_app

from onceover.bigquery import BigQueryConfig

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _process_settings() -> tuple[float, tuple[int, ...], int]:
    return sys.getswitchinterval(), gc.get_threshold(), gc.get_freeze_count()


def test_a_running_app_freezes_startup_objects_and_collects_less_often(app: FastAPI) -> None:
    before = _process_settings()
    assert before[2] == 0, "something else left objects frozen"
    with TestClient(app) as client:
        assert client.get("/api/health").status_code in (200, 503)
        switch_interval, thresholds, frozen = _process_settings()
        assert switch_interval == pytest.approx(GIL_SWITCH_INTERVAL_S)
        assert thresholds == (YOUNG_COLLECTION_THRESHOLD, *before[1][1:])
        assert frozen > 10_000  # the modules, the app and its schemas
    assert _process_settings() == before


def test_overlapping_apps_give_back_what_the_first_found(settings: Settings) -> None:
    before = _process_settings()
    first = TestClient(create_app(settings, bigquery=BigQueryConfig()))
    second = TestClient(create_app(settings, bigquery=BigQueryConfig()))
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # not nested: the first stops first
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD  # the second still runs
    assert gc.get_freeze_count() > 0
    second.__exit__(None, None, None)
    assert _process_settings() == before
