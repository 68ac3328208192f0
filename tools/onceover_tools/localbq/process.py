"""The local BigQuery as a child process (``onceover bigquery --ready-json``)."""

from __future__ import annotations

import json
import queue
import sys
import threading
from pathlib import Path
from typing import Any, Self

from onceover.bigquery import BigQueryConfig
from onceover.errors import LocalBigQueryError
from onceover.preflight import check_port_free
from onceover.processes import ChildProcess, StartStop
from onceover_tools.localbq.server import START_TIMEOUT_S, LocalBigQueryOptions


class LocalBigQueryProcess(StartStop):
    """Run the local BigQuery in a child process; ports are learnt from its ready line."""

    def __init__(
        self, options: LocalBigQueryOptions | None = None, *, log_path: Path | None = None
    ) -> None:
        self.options = options or LocalBigQueryOptions()
        argv = [
            sys.executable, "-m", "onceover_tools", "bigquery", "--ready-json",
            "--host", self.options.host,
            "--rest-port", str(self.options.rest_port),
            "--grpc-port", str(self.options.grpc_port),
            "--project", self.options.project,
        ]  # fmt: skip
        if self.options.data_dir is not None:
            argv += ["--data-dir", str(self.options.data_dir)]
        self.child = ChildProcess(
            "the local BigQuery", argv, log_path=log_path, capture_stdout=True
        )
        self._ready: dict[str, Any] | None = None

    @property
    def config(self) -> BigQueryConfig:
        """Client configuration pointing at the child."""
        if self._ready is None:
            raise LocalBigQueryError("the local BigQuery process is not running")
        return BigQueryConfig(
            rest_endpoint=self._ready["rest"],
            grpc_endpoint=self._ready["grpc"],
            project=self._ready["project"],
        )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Start the child and wait for its ready line."""
        for port, option in (
            (self.options.rest_port, "--rest-port"),
            (self.options.grpc_port, "--grpc-port"),
        ):
            check_port_free(self.options.host, port, option)
        popen = self.child.start()
        lines: queue.Queue[str] = queue.Queue()

        def read_ready_line() -> None:
            assert popen.stdout is not None
            lines.put(popen.stdout.readline())

        threading.Thread(target=read_ready_line, name="local-bigquery-ready", daemon=True).start()

        def ready() -> dict[str, Any] | None:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                return None
            if not line:  # EOF: the child is exiting; wait_until reports its status
                lines.put(line)
                return None
            parsed: dict[str, Any] = json.loads(line)
            return parsed

        try:
            self._ready = self.child.wait_until("its ready line", ready, timeout_s)
        except Exception as exc:
            self.child.stop()
            raise LocalBigQueryError(str(exc)) from exc
        return self

    def stop(self) -> int | None:
        """Stop the child (SIGTERM, then SIGKILL after a grace period)."""
        self._ready = None
        return self.child.stop()
