"""``SparkCluster`` waits for its workers through the master's web UI: an answer that is
not the UI's JSON yet (its HTML page, while the UI is still being set up) means "not
registered yet", not a crash of the test that starts the cluster."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from onceover_tools.spark_cluster import SparkCluster


@pytest.fixture
def master_ui() -> Iterator[tuple[int, list[bytes]]]:
    """A local HTTP server answering each GET with the next of its answers."""
    answers: list[bytes] = []

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.pop(0)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], answers
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_uis_html_page_before_its_json_counts_as_not_yet(
    master_ui: tuple[int, list[bytes]], tmp_path: Path
) -> None:
    port, answers = master_ui
    cluster = SparkCluster(tmp_path, workers=1, master_ui_port=port)
    answers += [
        b'<!DOCTYPE html><html data-bs-theme="light"></html>',
        b'{"workers": [{"state": "ALIVE"}]}',
    ]

    assert cluster._registered() is None
    assert cluster._registered() is True
