"""The app served for real (uvicorn on a free port, in a thread) for tests that need a
socket: Server-Sent Events, jobs posting over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from onceover.preflight import free_port
from tests.helpers.waiting import wait_until


@contextmanager
def serving(app: FastAPI, timeout_s: float = 30.0) -> Iterator[str]:
    """Serve ``app`` until the block ends; yields its base URL once it accepts requests."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False)
    )
    thread = threading.Thread(target=server.run, name="test-backend", daemon=True)
    thread.start()

    def alive() -> None:
        if not thread.is_alive():
            raise RuntimeError(f"the backend on port {port} stopped while starting")

    # uvicorn sets .started from its own thread
    wait_until(f"the backend on port {port} starting", lambda: server.started or None,
               timeout_s, every_s=0.02, between=alive)  # fmt: skip
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def wait_for_status(
    url: str,
    token: str,
    run_id: str,
    status: str,
    timeout_s: float = 30.0,
    seen: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """``GET /api/runs/{run_id}`` until it shows ``status`` (events arrive on the
    emitter's schedule); fails naming ``seen()``, else the last body."""
    last: dict[str, Any] = {}

    def shown() -> dict[str, Any] | None:
        response = httpx.get(
            f"{url}/api/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=10
        )
        if response.status_code == 200:
            last.update(response.json())
        return last if last.get("status") == status else None

    explain = seen or (lambda: last)
    return wait_until(f"run {run_id} {status}", shown, timeout_s, every_s=0.2, seen=explain)


def automatic_check(url: str, token: str, run_id: str, timeout_s: float) -> dict[str, Any]:
    """The reconciliation the control plane made when the run succeeded (it runs after
    the answer to the job's last event batch, so it may land a moment later)."""

    def made() -> dict[str, Any] | None:
        response = httpx.get(
            f"{url}/api/runs/{run_id}/reconciliations",
            headers={"Authorization": f"Bearer {token}"},
            timeout=10,
        )
        checks = [c for c in response.json()["data"] if c["trigger"] == "run_succeeded"]
        return checks[0] if checks else None

    return wait_until(f"run {run_id} reconciled on success", made, timeout_s, every_s=0.2)


def post_resume(
    url: str,
    run_id: str,
    token: str,
    headers: dict[str, str] | None = None,
    *,
    approve: bool = True,
) -> httpx.Response:
    """``POST .../resume`` as the dashboard's Resume sends it: approving the spec the
    run shows (its digest), with the token's role and any headers given."""
    params: dict[str, str] = {}
    if approve:
        detail = httpx.get(f"{url}/api/runs/{run_id}", headers=_bearer(token), timeout=60)
        if detail.status_code == 200 and detail.json()["spec_state"]["digest"]:
            params["approve_spec"] = detail.json()["spec_state"]["digest"]
    return httpx.post(
        f"{url}/api/runs/{run_id}/resume",
        params=params,
        headers={**_bearer(token), **(headers or {})},
        timeout=60,
    )


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
