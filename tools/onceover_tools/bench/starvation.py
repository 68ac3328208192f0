"""Ingest while BigQuery hangs and ``/api/health`` is flooded, against ingest on a quiet
backend: background work must not take the threads ingest needs.

    .venv/bin/python -m onceover_tools.bench.starvation [--events 100000] [--clients 4]
        [--batch 500] [--flood 32] [--health-client-interval S]

Three phases, each on a fresh SQLite database served by one backend process (what
``onceover serve`` runs by default) with its default settings, each posting the same
events (the control-plane bench's runs, :mod:`onceover_tools.bench.control_plane`) from
``--clients`` threads, ``--batch`` events a POST:

1. **quiet**: nothing asks BigQuery (no reconciliation when a run succeeds);
2. **BigQuery hanging, checks in flight**: the backend's BigQuery is a pair of listeners
   that accept connections and never answer (:mod:`onceover_tools.bench.hanging`), and every
   run that succeeds is reconciled. Before the posts, a run finishes and its check is
   seen calling BigQuery; the runs that succeed while the events are posted add theirs
   (two checks hang until their deadline, ``ONCEOVER_RECONCILE_TIMEOUT_S``, the queue
   fills, later checks are stored as not made);
3. **... and /api/health flooded**: the same, while ``--flood`` anonymous callers call
   ``GET /api/health`` without a pause, from a process of their own (so they do not
   share the posting clients' interpreter lock). They all come from one address, so
   the backend paces them (``ONCEOVER_HEALTH_CLIENT_INTERVAL_S``;
   ``--health-client-interval 0`` shows the cost of answering them all).

Printed: each phase's events/s, its ratio to quiet (the promise: at least 0.80 in the
last phase), POST p95, and what the flood got. Figures, not assertions. Exits 1 when a
phase failed (a POST that did not answer 200, events missing from the database).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import httpx

from onceover.waiting import poll_until
from onceover_tools.bench import control_plane as cp
from onceover_tools.bench.control_plane.databases import database, stored_and_size
from onceover_tools.bench.control_plane.ingest import post_all
from onceover_tools.bench.control_plane.server import bearer, server
from onceover_tools.bench.control_plane_workload import encode, run_events
from onceover_tools.bench.hanging import HangingBigQuery

FLOOD = 32
RATIO_TARGET = 0.80
CHECK_SEEN_S = 30.0  # the check before the posts must reach BigQuery within this
IN_FLIGHT_RUN = 1_000_000  # index of the run finished before the posts (none of the workload)


@dataclass
class Phase:
    """What one phase measured."""

    name: str
    rate: float | None = None
    post_ms: list[float] = field(default_factory=list)
    health: dict[str, float] | None = None  # the flood: answers/s, p50 and p95 ms, errors
    failed: str | None = None

    @property
    def post_p95_ms(self) -> float | None:
        return cp.percentile(self.post_ms, 0.95) if self.post_ms else None


@dataclass
class Starvation:
    """The three phases, quiet first."""

    events: int
    flood: int
    phases: list[Phase] = field(default_factory=list)

    def ratio(self, phase: Phase) -> float | None:
        quiet = self.phases[0].rate if self.phases else None
        return phase.rate / quiet if phase.rate and quiet else None

    @property
    def flooded_ratio(self) -> float | None:
        return self.ratio(self.phases[-1]) if len(self.phases) == 3 else None

    @property
    def failed(self) -> bool:
        return any(phase.failed for phase in self.phases)

    def as_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "flood_callers": self.flood,
            "phases": [
                {"name": p.name, "ingest_events_per_s": p.rate, "ratio_to_quiet": self.ratio(p),
                 "post_p95_ms": p.post_p95_ms, "health_flood": p.health, "failed": p.failed}
                for p in self.phases
            ],
        }  # fmt: skip


# -- the flood ----------------------------------------------------------------------


def _flood(base: str, callers: int, stop: EventType, started: EventType, out: Any) -> None:
    """The flood's process: ``callers`` threads calling /api/health, no token, no pause,
    until ``stop``; puts answers/s and latencies on ``out``."""
    latencies: list[list[float]] = [[] for _ in range(callers)]
    errors = [0] * callers

    def call(number: int) -> None:
        with httpx.Client(base_url=base, timeout=60) as http:
            while not stop.is_set():
                sent = time.perf_counter()
                try:
                    http.get("/api/health").read()
                except httpx.HTTPError:
                    errors[number] += 1
                    continue
                latencies[number].append((time.perf_counter() - sent) * 1000)
                started.set()

    threads = [threading.Thread(target=call, args=(n,), daemon=True) for n in range(callers)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    every = sorted(ms for per_thread in latencies for ms in per_thread)
    out.put(
        {
            "answers_per_s": len(every) / seconds,
            "p50_ms": statistics.median(every) if every else float("nan"),
            "p95_ms": cp.percentile(every, 0.95) if every else float("nan"),
            "errors": float(sum(errors)),
        }
    )


class Flood:
    """:func:`_flood` in a child process; ``figures`` once stopped."""

    def __init__(self, base: str, callers: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._started = context.Event()
        self._out = context.Queue()
        self._process = context.Process(
            target=_flood,
            args=(base, callers, self._stop, self._started, self._out),
            name="onceover-bench-health-flood",
        )
        self.figures: dict[str, float] | None = None

    def __enter__(self) -> Flood:
        self._process.start()
        if not self._started.wait(60):
            self._process.terminate()
            raise RuntimeError("the health flood got no answer within 60 s")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        try:
            self.figures = self._out.get(timeout=120)
        finally:
            self._process.join(30)
            if self._process.is_alive():
                self._process.kill()


# -- a phase ------------------------------------------------------------------------


def _in_flight_run(base: str, batch: int) -> int:
    """Post a whole run (it succeeds, so its check starts); the events posted."""
    start = datetime.now(UTC) - timedelta(hours=1)
    events = run_events(IN_FLIGHT_RUN, start)
    with httpx.Client(base_url=base, headers=bearer("ingest"), timeout=120) as http:
        for first in range(0, len(events), batch):
            response = http.post(
                "/api/events",
                content=encode(events[first : first + batch]),
                headers={"Content-Type": "application/json"},
            )
            if response.status_code != 200:
                raise RuntimeError(f"POST answered {response.status_code}: {response.text[:300]}")
    return len(events)


def run_phase(
    name: str,
    tmp: Path,
    work: cp.Workload,
    batch: int,
    *,
    hanging: bool,
    flood: int = 0,
    settings: dict[str, Any] | None = None,
) -> Phase:
    """One phase on a fresh SQLite database; a failure is recorded, not raised."""
    from onceover_backend.core.migrate import upgrade_to_head

    phase = Phase(name)
    print(f"\n{name}:", flush=True)
    try:
        with (
            database("sqlite", tmp, "") as url,
            HangingBigQuery() if hanging else nullcontext() as bigquery,
        ):
            upgrade_to_head(url)
            overrides = {**(settings or {}), "reconcile_on_success": hanging}
            config = bigquery.config if bigquery is not None else None
            # A backend stopping waits for the checks under way, which BigQuery never
            # answers: their figures are taken, so it is not waited for.
            stop_s = 5.0 if hanging else 30.0
            with server(url, overrides=overrides, bigquery=config, stop_s=stop_s) as base:
                extra = _in_flight_run(base, batch)
                if bigquery is not None:
                    poll_until(
                        lambda: bigquery.rest.accepted or None, CHECK_SEEN_S,
                        timed_out=lambda: RuntimeError(
                            f"no check reached BigQuery within {CHECK_SEEN_S:g} s"
                        ),
                    )  # fmt: skip
                    print("  a succeeded run's check is waiting on BigQuery", flush=True)
                with Flood(base, flood) if flood else nullcontext() as flooding:
                    seconds, phase.post_ms, _ = post_all(base, work)
                if flooding is not None:
                    phase.health = flooding.figures
                phase.rate = work.events / seconds
                stored, _ = stored_and_size(url)
                if stored != work.events + extra:
                    raise RuntimeError(
                        f"the database holds {stored:,} events, {work.events + extra:,} were sent"
                    )
                line = (
                    f"  posted {work.events:,} events in {seconds:.1f} s: {phase.rate:,.0f} "
                    f"events/s, POST p95 {phase.post_p95_ms:.0f} ms"
                )
                if bigquery is not None:
                    line += f"; BigQuery connections held: {bigquery.rest.accepted} REST"
                if phase.health:
                    line += (
                        f"; /api/health flood: {phase.health['answers_per_s']:,.0f} answers/s, "
                        f"p50 {phase.health['p50_ms']:.1f} ms, p95 {phase.health['p95_ms']:.1f} "
                        f"ms, {phase.health['errors']:.0f} errors"
                    )
                print(line, flush=True)
    except Exception as exc:
        phase.failed = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {name}: {phase.failed}", flush=True)
        traceback.print_exc()
    return phase


def measure(
    tmp: Path,
    events: int,
    clients: int,
    batch: int,
    flood: int,
    *,
    settings: dict[str, Any] | None = None,
) -> Starvation:
    """The three phases, side by side; ``settings`` for the backend in each."""
    work = cp.build_workload(events, events, clients, batch)
    print(
        f"events: {work.events:,} in {work.runs:,} runs, posted by {clients} clients, "
        f"{batch} a POST, in each phase; one backend process on SQLite",
        flush=True,
    )
    result = Starvation(events=work.events, flood=flood)
    result.phases.append(run_phase("quiet", tmp, work, batch, hanging=False, settings=settings))
    result.phases.append(
        run_phase(
            "BigQuery hanging, checks in flight", tmp, work, batch, hanging=True,
            settings=settings,
        )
    )  # fmt: skip
    result.phases.append(
        run_phase(
            f"BigQuery hanging, checks in flight, /api/health flooded by {flood} callers",
            tmp, work, batch, hanging=True, flood=flood, settings=settings,
        )
    )  # fmt: skip
    return result


def table(result: Starvation) -> list[str]:
    """The phases side by side, as Markdown."""

    def cell(value: float | None, fmt: str) -> str:
        return "FAILED" if value is None else format(value, fmt)

    names = ["quiet", "BigQuery hanging, checks in flight", "+ /api/health flooded"]
    flood = result.phases[-1].health if result.phases else None
    rows = [
        ["ingest, events/s", *(cell(p.rate, ",.0f") for p in result.phases)],
        ["ratio to quiet", *(cell(result.ratio(p), ".2f") for p in result.phases)],
        ["POST p95, ms", *(cell(p.post_p95_ms, ",.0f") for p in result.phases)],
    ]
    if flood:
        rows += [
            ["/api/health answers/s", "", "", f"{flood['answers_per_s']:,.0f}"],
            ["/api/health p95, ms", "", "", f"{flood['p95_ms']:,.1f}"],
        ]
    return [
        "| | " + " | ".join(names[: len(result.phases)]) + " |",
        "|---|" + "---:|" * len(result.phases),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events posted per phase")
    parser.add_argument("--clients", type=int, default=4, help="concurrent posting threads")
    parser.add_argument("--batch", type=int, default=500, help="events per POST")
    parser.add_argument("--flood", type=int, default=FLOOD, help="anonymous /api/health callers")
    parser.add_argument(
        "--health-client-interval",
        type=float,
        default=None,
        help="the backend's ONCEOVER_HEALTH_CLIENT_INTERVAL_S (default: its default; 0 "
        "answers every call at once)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if min(args.events, args.clients, args.batch, args.flood) < 1:
        parser.error("--events, --clients, --batch and --flood must be >= 1")
    settings: dict[str, Any] = {}
    if args.health_client_interval is not None:
        if args.health_client_interval < 0:
            parser.error("--health-client-interval must be >= 0")
        settings["health_client_interval_s"] = args.health_client_interval
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), load "
        f"average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="onceover-bench-starvation-") as tmp:
        result = measure(
            Path(tmp), args.events, args.clients, args.batch, args.flood, settings=settings
        )
    print("\n" + "\n".join(table(result)))
    if result.flooded_ratio is not None:
        verdict = "met" if result.flooded_ratio >= RATIO_TARGET else "missed"
        print(
            f"\ningest with BigQuery hanging and /api/health flooded / quiet = "
            f"{result.flooded_ratio:.2f} (target >= {RATIO_TARGET:.2f}: {verdict})"
        )
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(result.as_json(), indent=2) + "\n")
    return 1 if result.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
