"""Checks that the control plane's dependencies answer: the database and BigQuery."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text

from backend.models import DependencyHealth, HealthPublic
from onceover import __version__
from onceover.bigquery import BigQueryConfig, bigquery_client, write_client


def _timed(target: str, check: Callable[[], None]) -> DependencyHealth:
    started = time.perf_counter()
    try:
        check()
    except Exception as exc:  # a health check reports every failure, whatever its type
        error: str | None = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    else:
        error = None
    latency_ms = round((time.perf_counter() - started) * 1000, 1)
    return DependencyHealth(
        status="ok" if error is None else "error", target=target, latency_ms=latency_ms, error=error
    )


def check_database(engine: Engine) -> DependencyHealth:
    """``SELECT 1`` on a pooled connection."""

    def select_one() -> None:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    return _timed(engine.url.render_as_string(hide_password=True), select_one)


class BigQueryProbe:
    """Checks BigQuery over REST (list one dataset) and gRPC (the Write API channel connects).

    Clients are built on first use, not at start-up, so a backend without
    credentials still starts and reports why BigQuery is unreachable.
    """

    def __init__(self, config: BigQueryConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._clients: tuple[Any, Any] | None = None

    @property
    def target(self) -> str:
        if self.config.is_local:
            return (
                f"local BigQuery REST {self.config.rest_endpoint} gRPC {self.config.grpc_endpoint}"
            )
        return "BigQuery (Application Default Credentials)"

    def _get_clients(self) -> tuple[Any, Any]:
        with self._lock:
            if self._clients is None:
                self._clients = (bigquery_client(self.config), write_client(self.config))
            return self._clients

    def check(self, timeout_s: float) -> DependencyHealth:
        def answer() -> None:
            import grpc

            rest, write = self._get_clients()
            # retry=None: a health check reports the first failure instead of retrying for minutes.
            list(rest.list_datasets(max_results=1, retry=None, timeout=timeout_s))
            try:
                grpc.channel_ready_future(write.transport.grpc_channel).result(timeout=timeout_s)
            except grpc.FutureTimeoutError:
                raise ConnectionError(
                    f"the Storage Write API channel did not connect within {timeout_s:g} s"
                ) from None

        return _timed(self.target, answer)


async def check_health(
    engine: Engine, probe: BigQueryProbe, timeout_s: float, unauthenticated: int = 0
) -> HealthPublic:
    """Run both checks at once, each bounded by ``timeout_s``."""
    database, bigquery = await asyncio.gather(
        asyncio.to_thread(check_database, engine),
        asyncio.to_thread(probe.check, timeout_s),
    )
    ok = database.status == "ok" and bigquery.status == "ok"
    return HealthPublic(
        status="ok" if ok else "degraded",
        version=__version__,
        database=database,
        bigquery=bigquery,
        unauthenticated_requests=unauthenticated,
    )
