"""What each server process measures of itself: request latency and the depth of its
queues. Kept in prometheus-client's instruments; with ``onceover serve --workers N``
(``PROMETHEUS_MULTIPROC_DIR`` set before the workers start) each worker writes its own
into that folder and a scrape, whichever worker answers it, sums them all.

Labels stay bounded: a route's operation id (``getRun``), never its path."""

from __future__ import annotations

import os

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.multiprocess import MultiProcessCollector

MULTIPROCESS_DIR = "PROMETHEUS_MULTIPROC_DIR"

# From a 1 ms read to a 30 s reconciliation; a POST of events is 5-50 ms.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0, 30.0)  # fmt: skip


class Instruments:
    """One server's own instruments, in a registry of their own (an app per test, and
    none of prometheus-client's process metrics twice)."""

    def __init__(self) -> None:
        self.multiprocess = bool(os.environ.get(MULTIPROCESS_DIR))
        # In multiprocess mode the values live in files, read by MultiProcessCollector;
        # the registry the instruments join would only hold them twice.
        self.registry = CollectorRegistry()
        own = None if self.multiprocess else self.registry
        self.request_seconds = Histogram(
            "onceover_http_request_duration_seconds",
            "API requests' time to answer, by method and route (its operation id: getRun)",
            ["method", "operation"],
            buckets=LATENCY_BUCKETS,
            registry=own,
        )
        self.ingest_waiting = Gauge(
            "onceover_ingest_waiting_batches",
            "Event batches waiting for the group commit's transaction",
            registry=own,
            multiprocess_mode="livesum",
        )
        self.reconcile_waiting = Gauge(
            "onceover_reconcile_waiting_checks",
            "Automatic reconciliations waiting for or holding a reconciliation thread",
            registry=own,
            multiprocess_mode="livesum",
        )
        if self.multiprocess:
            MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]
