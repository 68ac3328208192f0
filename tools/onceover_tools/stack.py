"""The local stack: the local BigQuery and the backend, as child processes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Self

import httpx

from onceover.bigquery import BigQueryConfig
from onceover.errors import OnceoverError
from onceover.preflight import check_port_free, free_port
from onceover.processes import STOP_GRACE_S, ChildProcess, StartStop, job_environment

BACKEND_START_TIMEOUT_S = 60.0


class BackendProcess(StartStop):
    """``onceover serve`` in a child process, pointed at a BigQuery configuration."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        database_url: str | None = None,
        bigquery: BigQueryConfig,
        log_path: Path | None = None,
        tokens: dict[str, str] | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        """``settings``: more ``ONCEOVER_*`` variables for the backend (the demo's
        short alert interval, where its data goes)."""
        self.host = host
        self.port = port or free_port(host)
        # The control plane's own entry point: a server-only install has no tools.
        argv = [
            sys.executable,
            "-m",
            "onceover_backend",
            "serve",
            "--host",
            host,
            "--port",
            str(self.port),
        ]
        if database_url:
            argv += ["--database-url", database_url]
        env = job_environment(bigquery)
        if tokens:
            env["ONCEOVER_TOKENS"] = ",".join(f"{role}:{token}" for role, token in tokens.items())
        env.update(settings or {})
        self.child = ChildProcess("the backend", argv, env=env, log_path=log_path)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def health(self, timeout_s: float = 15.0) -> tuple[int, dict[str, Any]]:
        """``GET /api/health``: the status code and the body."""
        response = httpx.get(f"{self.url}/api/health", timeout=timeout_s)
        body: dict[str, Any] = response.json()
        return response.status_code, body

    def start(self, timeout_s: float = BACKEND_START_TIMEOUT_S) -> Self:
        """Start and wait until ``/api/health`` answers (whatever it says)."""
        check_port_free(self.host, self.port, "--port")
        self.child.start()

        def answering() -> bool | None:
            try:
                httpx.get(f"{self.url}/api/health", timeout=2.0)
            except httpx.TransportError:
                return None
            return True

        self.child.wait_until(f"answering on {self.url}", answering, timeout_s)
        return self

    def stop(self, grace_s: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL after ``grace_s`` (0: an outage, not a shutdown)."""
        return self.child.stop(grace_s)


def check_children(*children: ChildProcess) -> None:
    """Raise if any child has exited."""
    for child in children:
        code = child.poll()
        if code is not None:
            raise OnceoverError(f"{child.name} exited unexpectedly with status {code}")
