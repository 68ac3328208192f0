"""What a request hands to worker threads: each hand-off costs the event loop a queue,
a wake-up and a way back, which at a job's small posts (20 events) was a sixth of the
server's CPU (docs/journal/profiling.md, "What a small POST costs, again"). Only work that may
wait on the database or takes long goes to a thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio.to_thread
import pytest
from fastapi.testclient import TestClient
from onceover_backend.services.access.tokens import create_token
from sqlalchemy import Engine

from onceover import events as ev
from tests.backend.conftest import INGEST, VIEWER, bearer

pytestmark = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def hand_offs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of each function the app runs on a worker thread, in order."""
    ran: list[str] = []
    run_sync = anyio.to_thread.run_sync

    async def counted(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        inner = getattr(func, "func", func)  # functools.partial: what it calls
        ran.append(getattr(inner, "__name__", type(inner).__name__))
        return await run_sync(func, *args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counted)
    return ran


def _events(run_id: str) -> list[dict[str, Any]]:
    event = ev.RunHeartbeat(
        id=ev.event_id(run_id, "beat"), time=ev.now(), run_id=run_id,
        table="p.d.t", attempt_id="a1", rows_committed=0, batches_committed=0,
    )  # fmt: skip
    return [event.model_dump(mode="json")]


def test_a_post_of_events_hands_off_its_parse_and_its_store_only(
    client: TestClient, hand_offs: list[str]
) -> None:
    answer = client.post("/api/events", json=_events("run-a"), headers=bearer(INGEST))

    assert answer.status_code == 200, answer.text
    assert answer.json()["stored"] == 1
    # Before: the token's check, and each of the route's five dependencies besides.
    assert hand_offs == ["_parsed", "_store"]


def test_a_stored_token_is_looked_up_on_a_worker_thread(
    client: TestClient, engine: Engine, hand_offs: list[str]
) -> None:
    token = create_token(engine, "ingest", "job", actor="test")

    answer = client.post("/api/events", json=_events("run-b"), headers=bearer(token))

    assert answer.status_code == 200, answer.text
    assert hand_offs == ["stored", "_parsed", "_store"]


def test_a_read_hands_off_its_session_and_its_query_only(
    client: TestClient, engine: Engine, hand_offs: list[str]
) -> None:
    viewer = create_token(engine, "viewer", "dashboard", actor="test")

    configured = client.get("/api/runs", headers=bearer(VIEWER))
    configured_hand_offs = list(hand_offs)
    hand_offs.clear()
    stored = client.get("/api/runs", headers=bearer(viewer))

    assert configured.status_code == stored.status_code == 200
    # The session opened and closed on a thread (closing may roll back on the
    # database), the route's query, and FastAPI's check of a plain route's answer
    # (it runs that where it ran the route); the role check of a configured token not.
    assert len(configured_hand_offs) == 4, configured_hand_offs
    assert configured_hand_offs[0] == "__enter__"
    assert configured_hand_offs[-1] == "__exit__"
    assert sorted(hand_offs) == sorted(["stored", *configured_hand_offs])
