"""The backend under measurement: served in a child process of its own (one uvicorn
process, or ``onceover serve --workers N``), with the bench's tokens, and its CPU time."""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from onceover.bigquery import BigQueryConfig
from onceover.processes import ChildProcess
from onceover.waiting import poll_until

TOKENS = {
    "ingest": "bench-ingest-token-0123456789",
    "viewer": "bench-viewer-token-0123456789",
    "operator": "bench-operator-token-0123456789",
}
SERVER_START_S = 60.0


def _serve(
    database_url: str,
    port: int,
    overrides: dict[str, Any] | None = None,
    bigquery: BigQueryConfig | None = None,
) -> None:
    """The child process: the backend on ``port`` until SIGTERM; ``overrides`` are
    settings (the starvation bench turns reconciliation on against ``bigquery``)."""
    import uvicorn
    from onceover_backend.core.config import Settings
    from onceover_backend.main import create_app

    values: dict[str, Any] = {
        "database_url": database_url,
        "tokens": _tokens(),
        "stall_check_interval_s": NO_SWEEP_S,
        "reconcile_on_success": False,  # see _Workers: BigQuery is not part of this benchmark
        **(overrides or {}),
    }
    settings = Settings(**values)
    # Without a BigQuery given, none is asked (nothing reconciles).
    app = create_app(settings, bigquery=bigquery or BigQueryConfig())
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    uvicorn.Server(config).run()


NO_SWEEP_S = 3600  # no stalled-run sweep during the benchmark


def _tokens() -> str:
    return ",".join(f"{role}:{token}" for role, token in TOKENS.items())


class _Workers:
    """``onceover serve --workers N`` in a child process, as production runs it (uvicorn's
    supervisor cannot start from a multiprocessing child: its stdin is closed)."""

    def __init__(self, database_url: str, port: int, workers: int) -> None:
        # Nothing here asks BigQuery: no reconciliation when a run succeeds, and no
        # endpoint inherited from `onceover bench`, whose local BigQuery is gone by now.
        # (With both, each succeeded run's reconciliation retried the gone endpoint for
        # minutes on the thread pool ingest needs, and ingest slowed to a crawl.)
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("ONCEOVER_")}
        env = {
            **inherited,
            "ONCEOVER_RECONCILE_ON_SUCCESS": "false",
            "ONCEOVER_DATABASE_URL": database_url,
            "ONCEOVER_TOKENS": _tokens(),
            "ONCEOVER_STALL_CHECK_INTERVAL_S": str(NO_SWEEP_S),
        }
        command = [sys.executable, "-m", "onceover_backend", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(port), "--workers", str(workers)]
        # Its log (an access line per POST) goes to a file, shown only if it exits.
        self._logs = tempfile.TemporaryDirectory(prefix="onceover-bench-serve-")
        self._log_path = Path(self._logs.name) / "serve.log"
        self._child = ChildProcess(
            f"onceover serve --workers {workers}", command, env=env, log_path=self._log_path
        )
        self._child.start()

    def is_alive(self) -> bool:
        return self._child.poll() is None

    @property
    def exitcode(self) -> str:
        """Its exit status and the end of its log."""
        return f"{self._child.poll()}: {self._log_path.read_text(errors='replace')[-2000:]}"

    def cpu_seconds(self) -> float:
        """CPU time used so far by the supervisor and its workers (its process group)."""
        return process_cpu_seconds(group=self._child.pid)

    def stop(self) -> None:
        self._child.stop()  # its whole process group: the supervisor and its workers
        self._logs.cleanup()


class _Single:
    """The backend in one process (:func:`_serve`)."""

    def __init__(
        self,
        database_url: str,
        port: int,
        overrides: dict[str, Any] | None = None,
        bigquery: BigQueryConfig | None = None,
        stop_s: float = 30.0,
    ) -> None:
        self._stop_s = stop_s
        self._process = multiprocessing.get_context("spawn").Process(
            target=_serve,
            args=(database_url, port, overrides, bigquery),
            name="onceover-bench-backend",
        )
        self._process.start()

    def is_alive(self) -> bool:
        return self._process.is_alive()

    @property
    def exitcode(self) -> int | None:
        return self._process.exitcode

    def cpu_seconds(self) -> float:
        """CPU time the server process has used so far."""
        return process_cpu_seconds(pid=self._process.pid)

    def stop(self) -> None:
        self._process.terminate()
        self._process.join(self._stop_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()


@contextmanager
def server(
    database_url: str,
    workers: int = 1,
    *,
    overrides: dict[str, Any] | None = None,
    bigquery: BigQueryConfig | None = None,
    stop_s: float = 30.0,
) -> Iterator[str]:
    """:func:`serving`, its address only."""
    with serving(database_url, workers, overrides=overrides, bigquery=bigquery,
                 stop_s=stop_s) as (base, _):  # fmt: skip
        yield base


@contextmanager
def serving(
    database_url: str,
    workers: int = 1,
    *,
    overrides: dict[str, Any] | None = None,
    bigquery: BigQueryConfig | None = None,
    stop_s: float = 30.0,
) -> Iterator[tuple[str, _Workers | _Single]]:
    """The backend serving ``database_url`` (already at head) in a child process; with
    ``workers`` above 1, that many worker processes (PostgreSQL only). One process may
    take settings ``overrides`` and a ``bigquery`` to ask, and is killed if it has not
    stopped ``stop_s`` after SIGTERM."""
    from onceover.preflight import free_port

    if workers > 1 and (overrides or bigquery):
        raise ValueError("settings overrides and a BigQuery are for one server process only")
    port = free_port()
    process: _Workers | _Single = (
        _Workers(database_url, port, workers)
        if workers > 1
        else _Single(database_url, port, overrides, bigquery, stop_s)
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, headers=bearer("viewer"), timeout=5) as client:

            def answers() -> bool | None:
                try:
                    return client.get("/api/runs", params={"limit": 1}).status_code == 200 or None
                except httpx.TransportError:
                    return None

            def alive() -> None:
                if not process.is_alive():
                    raise RuntimeError(f"the backend exited with code {process.exitcode}")

            poll_until(answers, SERVER_START_S, every_s=0.1, between=alive, timed_out=lambda: (
                RuntimeError(f"the backend did not answer within {SERVER_START_S} s")
            ))  # fmt: skip
        yield base, process
    finally:
        process.stop()


def bearer(role: str) -> dict[str, str]:
    """The ``Authorization`` header of the bench's token for ``role``."""
    return {"Authorization": f"Bearer {TOKENS[role]}"}


def process_cpu_seconds(*, pid: int | None = None, group: int | None = None) -> float:
    """User and system CPU seconds of process ``pid``, or of every process in process
    group ``group`` (Linux ``/proc``; 0.0 where it cannot be read)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    pids = [pid] if pid is not None else [int(p) for p in os.listdir("/proc") if p.isdigit()]
    for one in pids:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        # after the name: state ppid pgrp ... utime (14th field) stime (15th)
        if group is not None and int(fields[2]) != group:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / ticks
