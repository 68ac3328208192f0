"""What a request body must get past (onceover_backend/api/body_guard.py), tried as an attacker
would: without a token, too large, too many events, values JSON cannot carry.

Each of these answered otherwise before: the body was read and parsed before the
token was looked at, with no size limit (four anonymous 100 MB POSTs took the server
from 0.3 to 1.5 GB); NaN, Infinity and lone surrogates answered 500 on every route
with a body; a 100,000-event batch was validated whole before the count refused it;
a 422 echoed a 10 MB input whole; every anonymous POST wrote an audit row.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from onceover_backend.tables import AuditLog, Event
from onceover_jobs.outbox import REJECTED_FILE, EventEmitter
from sqlalchemy import Engine
from sqlmodel import Session, func, select

from onceover import events as ev
from tests.backend import factory as f
from tests.backend.conftest import INGEST, OPERATOR, bearer
from tests.backend.live import serving
from tests.backend.test_roles import api_routes
from tests.helpers.waiting import wait_until

MUTATING = {"POST", "PUT", "PATCH", "DELETE"}
NOT_JSON_VALUES = {
    "NaN": b'{"name": NaN, "events": [NaN]}',
    "Infinity": b'[{"type": "heartbeat", "rows": Infinity}]',
    "-Infinity": b'{"threshold": -Infinity}',
    "1e999": b'{"threshold": 1e999}',
    "lone surrogate": b'{"name": "\\ud800"}',
    "lone surrogate key": b'[{"\\udfff": 1}]',
}


def _routes_with_bodies(app: FastAPI) -> Iterator[tuple[str, str]]:
    """Every mutating route under /api, its path parameters filled in."""
    for route in api_routes(app):
        for method in sorted(route.methods & MUTATING):
            yield method, route.path.replace("{", "").replace("}", "")


def _count(engine: Engine, table: Any) -> int:
    with Session(engine) as session:
        return int(session.exec(select(func.count()).select_from(table)).one())


@pytest.mark.parametrize("value", NOT_JSON_VALUES)
def test_values_json_cannot_carry_are_4xx_on_every_route_naming_where(
    app: FastAPI, client: TestClient, value: str
) -> None:
    routes = list(_routes_with_bodies(app))
    assert len(routes) >= 10, routes  # the walk finds the app's routes
    assert ("POST", "/api/events") in routes
    for method, path in routes:
        token = INGEST if path == "/api/events" else OPERATOR
        answer = client.request(
            method, path, content=NOT_JSON_VALUES[value],
            headers={**bearer(token), "Content-Type": "application/json"},
        )  # fmt: skip
        assert 400 <= answer.status_code < 500, (method, path, answer.status_code, answer.text)
        assert answer.json()["detail"], (method, path)
        # and without a Content-Type, which this FastAPI does not read as JSON (older ones did)
        bare = client.request(method, path, content=NOT_JSON_VALUES[value], headers=bearer(token))
        assert 400 <= bare.status_code < 500, (method, path, bare.status_code, bare.text)
    # on the events route, the event is named, so a job's spool sets only it aside
    answer = client.post(
        "/api/events",
        content=b'[{"type": "heartbeat"}, {"type": "heartbeat", "message": "\\udfff"}]',
        headers={**bearer(INGEST), "Content-Type": "application/json"},
    )
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", 1, "message"]


def test_the_event_count_is_checked_before_any_event_is_validated(
    client: TestClient, engine: Engine
) -> None:
    junk = json.dumps([{"type": "no such event"}] * 100_000)

    answer = client.post(
        "/api/events", content=junk, headers={**bearer(INGEST), "Content-Type": "application/json"}
    )

    assert answer.status_code == 422
    assert answer.json()["detail"] == [
        {"loc": ["body"], "msg": "at most 5000 events per request", "type": "value_error",
         "input": 100_000},
    ]  # fmt: skip
    assert _count(engine, Event) == 0


def test_a_422_echoes_a_bounded_sample_of_the_input(client: TestClient) -> None:
    event = f.as_json([f.started("r1", "a1", 0)])[0]
    event["job"] = "x" * 1_000_000  # at most 200 characters
    many_bad = [{"type": "heartbeat"}] * 300

    long_value = client.post("/api/events", json=[event], headers=bearer(INGEST))
    many_errors = client.post("/api/events", json=many_bad, headers=bearer(INGEST))

    assert long_value.status_code == 422
    assert len(long_value.content) < 5_000, len(long_value.content)
    (error,) = [e for e in long_value.json()["detail"] if e["loc"][-1] == "job"]
    assert error["input"].endswith("… (1,000,000 characters)")
    assert many_errors.status_code == 422
    detail = many_errors.json()["detail"]
    assert len(detail) == 101  # 100 named, then how many more
    assert detail[-1]["msg"].startswith("and ")
    assert detail[-1]["msg"].endswith(" more errors")


@pytest.fixture
def url(app: FastAPI) -> Iterator[str]:
    app.state.settings.max_body_bytes = 64 * 1024
    with serving(app) as url:
        yield url


def _raw(url: str, head: str, body_chunks: Iterator[bytes] | None = None) -> str:
    """Send a request's head (and as much of a body as the server takes) over a
    socket of our own; the server's answer, which must come without the rest."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.replace("\n", "\r\n").encode() + b"\r\n")
        try:
            for chunk in body_chunks or ():
                sock.sendall(chunk)
        except OSError:  # the server answered and closed: it stopped reading
            pass
        answer = b""
        while b"\r\n\r\n" not in answer:
            piece = sock.recv(65536)  # the timeout fails a server that waits for the body
            if not piece:
                break
            answer += piece
    return answer.decode(errors="replace")


def test_no_byte_of_a_body_is_read_without_a_token_or_over_the_cap(
    url: str, engine: Engine
) -> None:
    hundred_mb = 100 * 1024 * 1024
    anonymous = _raw(url, f"POST /api/events HTTP/1.1\nHost: x\nContent-Type: application/json\n"
                          f"Content-Length: {hundred_mb}\n")  # fmt: skip
    forged = _raw(url, f"POST /api/events HTTP/1.1\nHost: x\nAuthorization: Bearer forged\n"
                       f"Content-Length: {hundred_mb}\n")  # fmt: skip
    declared = _raw(url, f"POST /api/events HTTP/1.1\nHost: x\nAuthorization: Bearer {INGEST}\n"
                         f"Content-Length: {hundred_mb}\n")  # fmt: skip

    def chunks() -> Iterator[bytes]:
        for _ in range(1_000):  # 1,000 x 8 KiB: 8 MB if the server read it all
            yield b"2000\r\n" + b"[" * 0x2000 + b"\r\n"

    chunked = _raw(
        url,
        f"POST /api/events HTTP/1.1\nHost: x\nAuthorization: Bearer {INGEST}\n"
        "Content-Type: application/json\nTransfer-Encoding: chunked\n",
        chunks(),
    )

    assert anonymous.startswith("HTTP/1.1 401"), anonymous
    assert "www-authenticate: bearer" in anonymous.lower()
    assert forged.startswith("HTTP/1.1 401"), forged
    assert declared.startswith("HTTP/1.1 413"), declared
    assert chunked.startswith("HTTP/1.1 413"), chunked
    assert "65,536 bytes" in declared

    # anyone can send the first two: counted, not audited; a token's caller is audited
    def audited() -> list[tuple[str, int]] | None:  # written after the answer
        with Session(engine) as session:
            rows = session.exec(select(AuditLog.actor, AuditLog.status_code)).all()
        return sorted(rows) if len(rows) >= 2 else None

    assert wait_until("the 413s audited", audited, 10) == [("env:ingest", 413)] * 2
    health = httpx.get(f"{url}/api/health", timeout=30).json()
    assert health["unauthenticated_requests"] == 2


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    for answer in (
        client.get("/api/health"),
        client.get("/api/runs", headers=bearer(OPERATOR)),
        client.get("/api/no-such-route"),
        client.get("/"),
        client.post("/api/events", json=[]),
    ):
        headers = answer.headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"], answer.url
        assert "script-src 'self';" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY"
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"] == "no-referrer"


def test_a_spooled_event_the_backend_cannot_take_is_set_aside_and_the_rest_stored(
    url: str, engine: Engine, tmp_path: Path
) -> None:
    # A spool file as a job left it, one event in it with a value JSON cannot carry.
    # Its 500 used to be retried for good, and every later event of the spool waited.
    good = f.full_run("r1")
    bad = (
        f.heartbeat("r1", "a1", 5)
        .model_dump_json()
        .replace('"rows_committed":0', '"rows_committed":NaN')
    )
    assert "NaN" in bad
    lines = [event.model_dump_json() for event in good[:3]] + [bad]
    lines += [event.model_dump_json() for event in good[3:]]
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "events-00000000000000000001-1-000000.jsonl").write_text("\n".join(lines) + "\n")

    emitter = EventEmitter(url, INGEST, spool, flush_interval_s=0.05)
    try:
        wait_until("the spool drained", lambda: emitter.delivered == len(good) or None, 30)
    finally:
        emitter.close(1)

    assert _count(engine, Event) == len(good)
    (record,) = [json.loads(line) for line in (spool / REJECTED_FILE).read_text().splitlines()]
    assert record["status"] == 422
    assert "NaN is not a JSON number" in record["problem"]


def test_a_batch_over_the_body_limit_is_sent_again_in_halves(
    url: str, engine: Engine, tmp_path: Path
) -> None:
    events: list[ev.Event] = [f.started("r1", "a1", 0)]
    events += [f.acked("r1", "s1", 1 + n / 1000, offset=n, rows=10) for n in range(400)]
    size = len(json.dumps(f.as_json(events)))
    assert size > 2 * 64 * 1024, size  # over the cap, and over it at half

    emitter = EventEmitter(url, INGEST, tmp_path / "spool", flush_interval_s=0.05)
    try:
        for event in events:
            emitter.emit(event)
        assert emitter.flush(30)
        assert (emitter.delivered, emitter.rejected) == (len(events), 0)
    finally:
        emitter.close(1)
    assert _count(engine, Event) == len(events)
