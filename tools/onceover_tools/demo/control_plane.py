"""The few calls the demo makes to the backend's REST API, as an operator would."""

from __future__ import annotations

import threading
from typing import Any

import httpx

from onceover.errors import OnceoverError
from onceover_tools.demo.waiting import poll

TERMINAL = frozenset({"succeeded", "failed"})
REQUEST_TIMEOUT_S = 120.0
"""A reconciliation answers once BigQuery has (the backend's own deadline is 120 s)."""


class ControlPlane:
    """``url``'s API with ``token`` (an operator's: the demo reconciles and makes rules)."""

    def __init__(self, url: str, token: str, stop: threading.Event) -> None:
        self.url = url
        self.stop = stop
        self._http = httpx.Client(
            base_url=url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=REQUEST_TIMEOUT_S,
        )

    def close(self) -> None:
        self._http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The answer's JSON; a status outside 2xx raises, naming the call and the answer."""
        response = self._http.request(method, path, **kwargs)
        if not response.is_success:
            raise OnceoverError(
                f"{method} {path} answered {response.status_code}: {response.text[:300]}"
            )
        return response.json()

    def run(self, run_id: str) -> dict[str, Any] | None:
        """``GET /api/runs/{run_id}``; None until the job's first event has arrived."""
        response = self._http.get(f"/api/runs/{run_id}")
        if response.status_code == 404:
            return None
        if not response.is_success:
            raise OnceoverError(f"GET /api/runs/{run_id} answered {response.status_code}")
        body: dict[str, Any] = response.json()
        return body

    def finished_run(self, run_id: str, timeout_s: float) -> dict[str, Any]:
        """The run once the control plane shows it succeeded or failed (the job's last
        events are a flush behind its exit)."""

        def finished() -> dict[str, Any] | None:
            run = self.run(run_id)
            return run if run is not None and run["status"] in TERMINAL else None

        return poll(f"run {run_id} showing finished", finished, timeout_s, self.stop)

    def reconciled_run(self, run_id: str, timeout_s: float) -> dict[str, Any]:
        """The run once it carries a verdict (the backend reconciles each run that
        succeeds, by itself, moments after)."""

        def verdict() -> dict[str, Any] | None:
            run = self.run(run_id)
            return run if run is not None and run.get("reconciliation") else None

        return poll(f"run {run_id}'s first reconciliation", verdict, timeout_s, self.stop)

    def reconcile(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("POST", f"/api/runs/{run_id}/reconcile")
        return result

    def resume_plan(self, run_id: str) -> dict[str, Any]:
        plan: dict[str, Any] = self.call(
            "POST", f"/api/runs/{run_id}/resume", params={"dry_run": "true"}
        )
        return plan
