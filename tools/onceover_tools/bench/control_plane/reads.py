"""The dashboard's reads, timed: while ingest runs (:class:`Readers`) and once it is done
(:func:`time_reads`)."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from onceover_tools.bench.control_plane.figures import percentile
from onceover_tools.bench.control_plane.server import bearer
from onceover_tools.bench.control_plane_workload import TABLES, TYPICAL_BATCH, Workload


class Readers:
    """``count`` threads calling every read endpoint in turn, each with its own client,
    from :meth:`start` until :meth:`stop`: the dashboard's reads while ingest runs."""

    def __init__(self, base: str, endpoints: dict[str, tuple[str, dict[str, Any]]],
                 count: int) -> None:  # fmt: skip
        self._base = base
        self._endpoints = endpoints
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.timings: dict[str, list[float]] = {label: [] for label in endpoints}
        self.errors: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(n,)) for n in range(count)]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> dict[str, list[float]]:
        self._done.set()
        for thread in self._threads:
            thread.join()
        if self.errors:
            raise RuntimeError(self.errors[0])
        return self.timings

    def _read(self, number: int) -> None:
        labels = list(self._endpoints)
        shift = number * len(labels) // max(1, len(self._threads))  # readers out of step
        with httpx.Client(base_url=self._base, headers=bearer("viewer"), timeout=120) as http:
            while not self._done.is_set():
                for label in labels[shift:] + labels[:shift]:
                    if self._done.is_set():
                        return
                    path, params = self._endpoints[label]
                    started = time.perf_counter()
                    response = http.get(path, params=params)
                    elapsed = (time.perf_counter() - started) * 1000
                    if response.status_code == 200:
                        with self._lock:
                            self.timings[label].append(elapsed)
                    elif not (response.status_code == 404 and "{run_id}" in label):
                        self.errors.append(
                            f"{label} answered {response.status_code}: {response.text[:300]}"
                        )
                        return
                    # a 404 of a run not posted yet is not timed


def read_endpoints(work: Workload) -> dict[str, tuple[str, dict[str, Any]]]:
    """Label -> (path, query) of each timed read: every read the dashboard's pages make
    (frontend/src/pages), about the typical run and the first table where they name one.
    ``GET /api/runs/{id}/intents`` is left out: it asks BigQuery, which these servers
    have none of."""
    run = f"/api/runs/{work.typical_run}"
    table = TABLES[0]
    return {
        "GET /api/runs": ("/api/runs", {}),
        "GET /api/runs?status=succeeded&limit=50": (
            "/api/runs",
            {"status": "succeeded", "limit": 50},
        ),
        "GET /api/runs/{run_id}": (run, {}),
        "GET /api/metrics/write-errors?run_id=": (
            "/api/metrics/write-errors",
            {"run_id": work.typical_run},
        ),
        "GET /api/metrics/write-errors?table=&step=5m": (
            "/api/metrics/write-errors",
            {"table": table, "step": "5m"},
        ),
        "GET /api/overview": ("/api/overview", {}),
        "GET /api/runs?status=failed&status=stalled": (
            "/api/runs",
            {"status": ["failed", "stalled"]},
        ),
        "GET /api/runs?table=": ("/api/runs", {"table": table}),
        "GET /api/runs/{run_id}/batches/{batch}": (f"{run}/batches/{TYPICAL_BATCH}", {}),
        "GET /api/runs/{run_id}/reconciliations": (f"{run}/reconciliations", {}),
        "GET /api/tables": ("/api/tables", {}),
        "GET /api/tables/{table}/reconciliations": (f"/api/tables/{table}/reconciliations", {}),
        "GET /api/alerts": ("/api/alerts", {}),
        # Prometheus's scrape: the overview's figures and every table's totals at once.
        "GET /metrics": ("/metrics", {}),
    }


def time_reads(base: str, work: Workload, reads: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, headers=bearer("viewer"), timeout=120) as http:
        for label, (path, params) in read_endpoints(work).items():
            timings[label] = []
            for number in range(3 + reads):
                started = time.perf_counter()
                response = http.get(path, params=params)
                elapsed = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    raise RuntimeError(
                        f"{label} answered {response.status_code}: {response.text[:300]}"
                    )
                if number >= 3:
                    timings[label].append(elapsed)
    return timings


def print_reads(reads: dict[str, list[float]]) -> None:
    """Each read's p50 and p95, a line each, as the bench prints them."""
    for label, values in reads.items():
        if values:
            print(
                f"    {label:<46} p50 {percentile(values, 0.5):8.1f} ms, "
                f"p95 {percentile(values, 0.95):8.1f} ms ({len(values)} reads)",
                flush=True,
            )
        else:
            print(f"    {label:<46} no read answered", flush=True)
