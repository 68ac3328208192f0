"""The local BigQuery running inside this process, on an event loop of its own."""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from onceover.bigquery import LOCAL_PROJECT, BigQueryConfig
from onceover.errors import LocalBigQueryError
from onceover.preflight import check_port_free
from onceover.processes import StartStop
from onceover_tools.localbq import patches

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LocalBigQueryOptions:
    """How to run the local BigQuery. Port 0 picks a free port."""

    host: str = "127.0.0.1"
    rest_port: int = 0
    grpc_port: int = 0
    data_dir: Path | None = None
    """Keep tables in DuckDB files here; ``None`` keeps everything in memory."""
    project: str = LOCAL_PROJECT
    log_level: str = "warning"

    def emulator_settings(self) -> Any:
        """bqemulator ``Settings`` for these options."""
        from bqemulator.config import LogFormat, LogLevel, PersistenceMode, Settings

        return Settings(
            rest_host=self.host,
            grpc_host=self.host,
            rest_port=self.rest_port,
            grpc_port=self.grpc_port,
            persistence_mode=(
                PersistenceMode.PERSISTENT if self.data_dir else PersistenceMode.EPHEMERAL
            ),
            data_dir=self.data_dir,
            default_project_id=self.project,
            # Avro load/extract would download DuckDB's avro extension at start.
            enable_format_extensions=False,
            # /admin/streams shows each stream's offset and state: read-only, handy.
            admin_enabled=True,
            log_level=LogLevel(self.log_level),
            log_format=LogFormat.CONSOLE,
            metrics_enabled=False,
            tracing_enabled=False,
        )


class LocalBigQuery(StartStop):
    """bqemulator, patched (see :mod:`onceover_tools.localbq.patches`), serving REST and gRPC.

    Use as a context manager or call :meth:`start` / :meth:`stop`::

        with LocalBigQuery() as bq:
            client = bigquery_client(bq.config)
    """

    def __init__(self, options: LocalBigQueryOptions | None = None) -> None:
        self.options = options or LocalBigQueryOptions()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: Any = None

    @property
    def rest_url(self) -> str:
        return f"http://{self.options.host}:{self._started().rest_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"{self.options.host}:{self._started().grpc_port}"

    @property
    def config(self) -> BigQueryConfig:
        """Client configuration pointing at this server."""
        return BigQueryConfig(
            rest_endpoint=self.rest_url,
            grpc_endpoint=self.grpc_endpoint,
            project=self.options.project,
        )

    @property
    def server(self) -> Any:
        """The running ``bqemulator.server.EmulatorServer`` (for tests that inspect it)."""
        return self._started()

    def start(self) -> Self:
        """Start serving; returns once both endpoints accept connections."""
        if self._server is not None:
            return self
        patches.install()
        for port, option in (
            (self.options.rest_port, "--rest-port"),
            (self.options.grpc_port, "--grpc-port"),
        ):
            check_port_free(self.options.host, port, option)
        from bqemulator.server import EmulatorServer

        server = EmulatorServer(self.options.emulator_settings())
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="local-bigquery", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(server.start(), loop).result(START_TIMEOUT_S)
        except BaseException as exc:
            self._shutdown_loop(loop, thread)
            raise LocalBigQueryError(f"the local BigQuery did not start: {exc}") from exc
        self._server, self._loop, self._thread = server, loop, thread
        logger.info("local BigQuery serving REST %s gRPC %s", self.rest_url, self.grpc_endpoint)
        return self

    def stop(self) -> None:
        """Stop serving and release the ports; safe to call twice."""
        server, loop, thread = self._server, self._loop, self._thread
        if server is None or loop is None or thread is None:
            return
        self._server = self._loop = self._thread = None
        grpc_server = server._grpc_server
        try:
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(STOP_TIMEOUT_S)
        finally:
            patches.shutdown_pool(grpc_server)
            self._shutdown_loop(loop, thread)

    def _started(self) -> Any:
        if self._server is None:
            raise LocalBigQueryError("the local BigQuery is not running; call start() first")
        return self._server

    @staticmethod
    def _shutdown_loop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_TIMEOUT_S)
        if not thread.is_alive():
            loop.close()
