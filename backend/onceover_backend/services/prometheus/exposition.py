"""The scrape: the process's instruments and the database's figures, rendered in the
Prometheus text format, on the API's port behind a token and, where configured, on a
port of its own without one (``ONCEOVER_METRICS_PORT``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import timedelta
from wsgiref.simple_server import WSGIServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest, start_http_server
from sqlalchemy import Engine

from onceover_backend.services.prometheus.collector import StoredFigures
from onceover_backend.services.prometheus.instruments import Instruments

logger = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST


class MetricsExport:
    """What ``GET /metrics`` answers: :meth:`render` reads the database (a few queries)
    and each process's instruments."""

    def __init__(self, engine: Engine, stale_after: Callable[[], timedelta]) -> None:
        self.instruments = Instruments()
        self.registry = self.instruments.registry
        self.registry.register(StoredFigures(engine, stale_after))
        self._listener: tuple[WSGIServer, threading.Thread] | None = None

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def listen(self, host: str, port: int) -> None:
        """Serve the same scrape on ``host:port``, without a token: for a Prometheus
        that reaches that port alone (a private network, a sidecar)."""
        self._listener = start_http_server(port, addr=host, registry=self.registry)
        logger.info("metrics on http://%s:%d/metrics (no token)", host, port)

    def close(self) -> None:
        if self._listener is not None:
            server, thread = self._listener
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._listener = None
