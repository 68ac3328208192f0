"""``GET /api/changes``: Server-Sent Events announce changed runs as they change."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
from fastapi import FastAPI

from tests.backend import factory as f
from tests.backend.conftest import INGEST, VIEWER, bearer
from tests.backend.live import serving

READ_TIMEOUT_S = 15.0  # a missing announcement fails the test instead of hanging it


def _events(lines: Iterator[str]) -> Iterator[tuple[str, str, str]]:
    """(event, id, data) of each Server-Sent Event; comments (keep-alives) skipped."""
    name = ident = data = ""
    for line in lines:
        if line == "":
            if name or data:
                yield name, ident, data
            name = ident = data = ""
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("id:"):
            ident = line[3:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()


def test_a_stored_event_is_announced_and_a_reconnect_misses_nothing(app: FastAPI) -> None:
    with serving(app) as url, httpx.Client(base_url=url, timeout=READ_TIMEOUT_S) as client:
        with client.stream("GET", "/api/changes", headers=bearer(VIEWER)) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            events = _events(stream.iter_lines())
            name, ready_id, _ = next(events)
            assert name == "ready"

            posted = client.post(
                "/api/events", json=f.as_json(f.full_run("r1")), headers=bearer(INGEST)
            )
            assert posted.status_code == 200

            name, _, data = next(events)
            assert name == "runs"
            runs = json.loads(data)["runs"]
            assert [(r["run_id"], r["status"], r["rows_committed"]) for r in runs] == [
                ("r1", "succeeded", 100)
            ]

        # A page that lost its connection comes back with the last id it saw.
        headers = {**bearer(VIEWER), "Last-Event-ID": ready_id}
        with client.stream("GET", "/api/changes?run_id=r1", headers=headers) as again:
            events = _events(again.iter_lines())
            assert next(events)[0] == "ready"
            name, _, data = next(events)
            assert name == "runs"
            assert json.loads(data)["runs"][0]["run_id"] == "r1"


def test_changes_need_a_viewer_token(app: FastAPI) -> None:
    with serving(app) as url:
        assert httpx.get(f"{url}/api/changes", timeout=10).status_code == 401
        response = httpx.get(f"{url}/api/changes", headers=bearer(INGEST), timeout=10)
        assert response.status_code == 403
