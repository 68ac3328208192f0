"""``SparkCluster`` waits for its workers through the master's web UI: an answer that is
not the UI's JSON yet (its HTML page, while the UI is still being set up) means "not
registered yet", not a crash of the test that starts the cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from onceover_tools.spark_cluster import SparkCluster

from tests.helpers.local_http import LocalServer, TrackedHandler


class _NextAnswer(TrackedHandler):
    def do_GET(self) -> None:  # noqa: N802 (the name http.server calls)
        body = self.owner.answers.pop(0)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _MasterUI(LocalServer):
    """Answers each GET with the next of its ``answers``."""

    handler = _NextAnswer

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[bytes] = []


@pytest.fixture
def master_ui() -> Iterator[_MasterUI]:
    ui = _MasterUI()
    ui.up()
    try:
        yield ui
    finally:
        ui.down()


def test_the_uis_html_page_before_its_json_counts_as_not_yet(
    master_ui: _MasterUI, tmp_path: Path
) -> None:
    cluster = SparkCluster(tmp_path, workers=1, master_ui_port=master_ui.port)
    master_ui.answers += [
        b'<!DOCTYPE html><html data-bs-theme="light"></html>',
        b'{"workers": [{"state": "ALIVE"}]}',
    ]

    assert cluster._registered() is None
    assert cluster._registered() is True
