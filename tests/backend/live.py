"""The app served for real (uvicorn on a free port, in a thread) for tests that need a
socket: Server-Sent Events, jobs posting over HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from onceover.preflight import free_port


@contextmanager
def serving(app: FastAPI, timeout_s: float = 30.0) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL once it accepts requests."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, name="test-backend", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the backend did not start on port {port}")
        time.sleep(0.02)  # uvicorn sets .started from its own thread
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_for_status(
    url: str, token: str, run_id: str, status: str, timeout_s: float = 30.0
) -> dict[str, Any]:
    """``GET /api/runs/{run_id}`` until it shows ``status``; the last body otherwise."""
    deadline = time.monotonic() + timeout_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = httpx.get(
            f"{url}/api/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        if response.status_code == 200:
            body = response.json()
            if body.get("status") == status:
                break
        time.sleep(0.2)  # events arrive on the emitter's schedule; look again
    return body
