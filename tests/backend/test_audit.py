"""Every mutating call leaves an audit row; every request carries a request id."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from onceover_backend.core.logging import configure_backend_logging

from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, VIEWER, bearer


def _audit(client: TestClient, **params: Any) -> list[dict[str, Any]]:
    response = client.get("/api/audit", params=params, headers=bearer(OPERATOR))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["count"] == len(body["data"])
    data: list[dict[str, Any]] = body["data"]
    return data


def test_each_post_is_audited_with_actor_outcome_and_request_id(client: TestClient) -> None:
    events = f.as_json(f.full_run("r1"))
    stored = client.post(
        "/api/events", json=events, headers={**bearer(INGEST), "X-Request-ID": "req-1"}
    )
    repeated = client.post("/api/events", json=events, headers=bearer(INGEST))
    denied = client.post("/api/events", json=events, headers=bearer(VIEWER))
    anonymous = client.post("/api/events", json=events)
    broken = client.post("/api/events", json=[{"type": "run_started"}], headers=bearer(INGEST))

    assert [r.status_code for r in (stored, repeated, denied, anonymous, broken)] == [
        200, 200, 403, 401, 422,
    ]  # fmt: skip
    assert stored.headers["X-Request-ID"] == "req-1"
    entries = list(reversed(_audit(client)))  # oldest first
    assert [(e["actor"], e["action"], e["status_code"]) for e in entries] == [
        ("env:ingest", "ingestEvents", 200),
        ("env:ingest", "ingestEvents", 200),
        ("env:viewer", "ingestEvents", 403),
        # no row for the anonymous call: anyone can make those (counted by /api/health)
        ("env:ingest", "ingestEvents", 422),
    ]
    first, second, forbidden, rejected = entries
    assert first["request_id"] == "req-1"
    assert first["target"] == "runs r1"
    assert first["outcome"] == "ok: stored 11 of 11 events (0 duplicates)"
    assert second["outcome"] == "ok: stored 0 of 11 events (11 duplicates)"
    assert forbidden["outcome"].startswith("forbidden:")
    assert "needs the ingest role" in forbidden["outcome"]
    assert rejected["outcome"].startswith("rejected:")
    assert '"loc":["body",0' in rejected["outcome"]
    assert rejected["request_id"] == broken.headers["X-Request-ID"]


@pytest.mark.parametrize("where", ["storing the events", "storing the audit row"])
def test_an_ingest_whose_transaction_fails_is_audited_once_as_failed(
    app: Any, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """A stored batch's audit row is written in the batch's own transaction; one that
    rolls back, before its row was made or at its row, takes the row with it, and the
    middleware writes the failure instead."""
    from onceover_backend.api.middleware import audit_entry
    from onceover_backend.api.routes import events as route
    from onceover_backend.services.ingest import transaction

    def fail(*_: Any, **__: Any) -> None:
        raise RuntimeError("disk full")

    def unstorable_row(*args: Any, **kwargs: Any) -> Any:
        row = audit_entry(*args, **kwargs)
        row.actor = None  # type: ignore[assignment]  # NOT NULL: the commit's flush fails
        return row

    events = f.as_json(f.full_run("r1"))
    with TestClient(app, raise_server_exceptions=False) as client:
        stored = client.post(
            "/api/events", json=events[:3], headers={**bearer(INGEST), "X-Request-ID": "ok-1"}
        )
        with monkeypatch.context() as patch:
            if where == "storing the events":
                patch.setattr(transaction, "store_new", fail)
            else:
                patch.setattr(route, "audit_entry", unstorable_row)
            failed = client.post(
                "/api/events", json=events[3:], headers={**bearer(INGEST), "X-Request-ID": "no-2"}
            )
        assert (stored.status_code, failed.status_code) == (200, 500)
        entries = list(reversed(_audit(client)))
        run = client.get("/api/runs/r1", headers=bearer(OPERATOR)).json()
    assert [(e["request_id"], e["status_code"]) for e in entries] == [("ok-1", 200), ("no-2", 500)]
    assert entries[0]["outcome"] == "ok: stored 3 of 3 events (0 duplicates)"
    assert entries[0]["target"] == "runs r1"
    assert entries[1]["outcome"].startswith("error"), entries[1]
    assert entries[1]["target"] is None  # what the rolled-back try stored is not claimed
    assert run["status"] != "succeeded"  # nothing of the failed batch was kept


def test_reads_are_not_audited_and_the_log_is_operator_only(client: TestClient) -> None:
    client.get("/api/runs", headers=bearer(VIEWER))

    assert client.get("/api/audit", headers=bearer(VIEWER)).status_code == 403
    assert _audit(client) == []
    client.post("/api/events", json=[], headers=bearer(INGEST))
    assert [e["action"] for e in _audit(client, actor="env:ingest")] == ["ingestEvents"]
    assert _audit(client, actor="nobody") == []


def test_a_malformed_request_id_is_replaced(client: TestClient) -> None:
    response = client.get("/api/runs", headers={**bearer(VIEWER), "X-Request-ID": "a b\x01"})

    assert response.headers["X-Request-ID"] != "a b\x01"
    assert len(response.headers["X-Request-ID"]) == 32


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The backend's log configuration, writing to a buffer; the old one restored after."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_backend_logging("json", stream=stream)
    yield stream
    root.handlers[:] = saved[0]
    root.setLevel(saved[1])


def test_logs_are_cloud_logging_json_with_the_request_id(
    client: TestClient, json_logs: io.StringIO
) -> None:
    client.get("/api/runs", headers={**bearer(VIEWER), "X-Request-ID": "trace-me"})

    lines = [json.loads(line) for line in json_logs.getvalue().splitlines() if line.strip()]
    access = [line for line in lines if line.get("request_id") == "trace-me"]
    assert access, lines
    assert access[0]["severity"] == "INFO"
    assert "GET /api/runs 200" in access[0]["message"]
    assert access[0]["httpRequest"]["status"] == 200
