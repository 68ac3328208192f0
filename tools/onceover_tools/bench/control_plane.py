"""Ingest throughput and read latency of the control plane, SQLite against PostgreSQL.

    .venv/bin/python -m onceover_tools.bench.control_plane [--events 1000000[,10000000]]
        [--http-events N] [--databases sqlite,postgresql] [--clients 4] [--batch 500]
        [--fill-batch 5000] [--reads 50] [--readers 1] [--server-workers 1]

The events look like real runs (:mod:`onceover_tools.bench.control_plane_workload`:
about 2,000 a run, streams, appends, batches, heartbeats, one run in 25 failing).
``--events`` is how many are stored in all; several sizes, comma-separated, are
measured one after the other, each on fresh databases (``--events 1000000,10000000``:
ingest with 1,000,000 stored, then with 10,000,000). For each size and each database
(SQLite: a file in a temp dir; PostgreSQL: a fresh database on ``--postgres-admin``,
dropped at the end) migrated to head:

1. **Fill.** The oldest ``events - http_events`` events are made run by run and
   stored in-process with :func:`onceover_backend.services.ingest.transaction.ingest_events`
   (``--fill-batch`` events a call, no server running), in bounded memory whatever
   their number; its rate is printed over each tenth, so a cost that grows with what is
   stored shows even before the server starts. It stores what a real ingest stores:
   the same function, every table.
2. **Ingest under reads.** The backend is started as a real server (uvicorn in a child
   process of its own, so the clients do not share its GIL; on PostgreSQL,
   ``--server-workers`` processes of ``onceover serve --workers``) and the newest
   ``http_events`` (default: all) are posted over HTTP, ``--batch`` events a POST, from
   ``--clients`` threads with their own ``httpx.Client``, each thread posting its own
   runs; meanwhile ``--readers`` threads call every read the dashboard makes
   (:func:`read_endpoints`) in turn, as people watching it would. Figures: events/s
   over the wall time and over each tenth, per-POST latency, the server's CPU time per
   event posted (its reads included: a figure the machine's other load moves less than
   the rate), and p50/p95 of each read under ingest. A read of a run that has not been
   posted yet (404) is not timed.
3. **Idle reads.** With every event stored, each read endpoint is called ``--reads``
   times (after three untimed calls) one after the other: p50/p95 latency.

Figures are printed side by side at the end, a column per database and size; with
several sizes, each database's ingest rate at the largest over the smallest too. None
is asserted. Exits 1 when a database failed (a POST or read that did not answer 200,
or a wrong count of stored events).
"""

from __future__ import annotations

import argparse
import math
import multiprocessing
import os
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx

from onceover.bigquery import BigQueryConfig
from onceover.processes import ChildProcess
from onceover.waiting import poll_until
from onceover_tools.bench.control_plane_workload import (
    RUN_EVERY_S,
    TABLES,
    TYPICAL_BATCH,
    Workload,
    build_workload,
    encode,
    run_events,
)

__all__ = ["TABLES", "Workload", "build_workload"]

DATABASES = ("sqlite", "postgresql")
MAX_RUN_EVERY_S = 86_400  # a run a day: 10,000,000 events then span 13 years
POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
TOKENS = {
    "ingest": "bench-ingest-token-0123456789",
    "viewer": "bench-viewer-token-0123456789",
    "operator": "bench-operator-token-0123456789",
}
SERVER_START_S = 60.0
_run_events = run_events  # the starvation bench posts one more run of the same shape
_encode = encode


# -- databases and the server -------------------------------------------------------


@contextmanager
def database(kind: str, tmp: Path, admin_dsn: str) -> Iterator[str]:
    """An empty database's SQLAlchemy URL; a PostgreSQL one is dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp / f'bench-{uuid.uuid4().hex[:8]}.db'}"
        return
    import psycopg

    name = f"onceover_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        base = admin_dsn.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://", 1)
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
        with httpx.Client(base_url=base, headers=_bearer("viewer"), timeout=5) as client:

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


def _bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


# -- the phases ---------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


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


@dataclass
class Figures:
    """What one database measured at one size; ``None`` where a phase did not run."""

    database: str
    stored: int = 0
    size_mb: float | None = None
    fill_rate: float | None = None
    fill_tenths: list[float] = field(default_factory=list)  # events/s over each tenth filled
    ingest_seconds: float | None = None
    posted: int = 0
    post_ms: list[float] = field(default_factory=list)
    tenths: list[float] = field(default_factory=list)  # events/s over each tenth posted
    server_cpu_s: float | None = None  # the server's CPU time while the events were posted
    reads_ms: dict[str, list[float]] = field(default_factory=dict)  # idle, all stored
    reads_under_ingest_ms: dict[str, list[float]] = field(default_factory=dict)
    failed: str | None = None
    events: int = 0  # the size: events stored in all once every phase ran

    @property
    def ingest_rate(self) -> float | None:
        if not self.ingest_seconds or not self.posted:
            return None
        return self.posted / self.ingest_seconds

    @property
    def server_us_per_event(self) -> float | None:
        if self.server_cpu_s is None or not self.posted:
            return None
        return self.server_cpu_s / self.posted * 1e6


def fill(
    database_url: str, work: Workload, batch: int, *, progress: bool = False
) -> tuple[float, list[float]]:
    """Store ``work``'s oldest events in-process, ``batch`` events a transaction, made
    run by run as they go in: the seconds it took, and the events/s over each tenth
    (none when a batch is more than a tenth)."""
    from onceover_backend.core.db import build_engine
    from onceover_backend.services.ingest.transaction import ingest_events

    engine = build_engine(database_url)
    marks: list[float] = []  # seconds since the start at each tenth
    stored = 0
    started = time.perf_counter()
    try:
        for events in work.fill_batches(batch):
            ingest_events(engine, events)
            stored += len(events)
            while len(marks) < 10 and stored >= work.fill_events * (len(marks) + 1) / 10:
                marks.append(time.perf_counter() - started)
                if progress:
                    print(f"    filled {stored:,} in {marks[-1]:.0f} s", flush=True)
    finally:
        engine.dispose()
    seconds = time.perf_counter() - started
    if batch > work.fill_events / 10:
        return seconds, []
    tenth = work.fill_events / 10
    return seconds, [tenth / (b - a) for a, b in zip([0.0, *marks], marks, strict=False)]


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
        with httpx.Client(base_url=self._base, headers=_bearer("viewer"), timeout=120) as http:
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


def post_all(
    base: str, work: Workload, readers: Readers | None = None
) -> tuple[float, list[float], list[float]]:
    """Post every client's bodies from its own thread (``readers`` reading meanwhile):
    the wall seconds, each POST's milliseconds, and the events/s over each tenth of the
    events posted."""
    latencies: list[list[float]] = [[] for _ in work.clients]
    done: list[tuple[float, int]] = []  # (seconds since the start, events) of each POST
    errors: list[str] = []
    start = [0.0]  # set when every client is ready, before any POST

    def begin() -> None:
        start[0] = time.perf_counter()
        if readers is not None:
            readers.start()

    gate = threading.Barrier(len(work.clients) + 1, action=begin)

    def client(number: int) -> None:
        headers = {**_bearer("ingest"), "Content-Type": "application/json"}
        with httpx.Client(base_url=base, headers=headers, timeout=300) as http:
            gate.wait()
            for count, body in work.clients[number]:
                sent = time.perf_counter()
                response = http.post("/api/events", content=body)
                answered = time.perf_counter()
                latencies[number].append((answered - sent) * 1000)
                done.append((answered - start[0], count))
                if response.status_code != 200:
                    errors.append(f"POST answered {response.status_code}: {response.text[:300]}")
                    return
                stored = response.json()["stored"]
                if stored != count:
                    errors.append(f"POST stored {stored} of {count} new events")
                    return

    threads = [threading.Thread(target=client, args=(n,)) for n in range(len(work.clients))]
    for thread in threads:
        thread.start()
    gate.wait()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - start[0]
    if readers is not None:
        readers.stop()
    if errors:
        raise RuntimeError(errors[0])
    return seconds, [ms for per_client in latencies for ms in per_client], by_tenth(done)


def by_tenth(done: list[tuple[float, int]]) -> list[float]:
    """Events/s over each tenth of the events, from (seconds, events) per POST."""
    total = sum(count for _, count in done)
    if not done or max(count for _, count in done) > total / 10:
        return []  # too few POSTs to tell tenths apart
    rates: list[float] = []
    stored = 0
    previous = 0.0
    for seconds, count in sorted(done):
        stored += count
        while len(rates) < 10 and stored >= total * (len(rates) + 1) / 10:
            rates.append(total / 10 / max(seconds - previous, 1e-9))
            previous = seconds
    return rates


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
    }


def time_reads(base: str, work: Workload, reads: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {}
    with httpx.Client(base_url=base, headers=_bearer("viewer"), timeout=120) as http:
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


def stored_and_size(database_url: str) -> tuple[int, float]:
    """The events the database holds and its size in MB (an SQLite file with its WAL)."""
    from onceover_backend.core.db import build_engine
    from onceover_backend.tables import Event
    from sqlalchemy import func, text
    from sqlalchemy.engine import make_url
    from sqlmodel import Session, select

    engine = build_engine(database_url)
    try:
        with Session(engine) as session:
            stored = int(session.exec(select(func.count()).select_from(Event)).one())
            if engine.dialect.name == "postgresql":
                size = int(session.scalar(text("SELECT pg_database_size(current_database())")))
            else:
                path = Path(str(make_url(database_url).database))
                size = sum(p.stat().st_size for p in path.parent.glob(f"{path.name}*"))
    finally:
        engine.dispose()
    return stored, size / 1e6


def bench_database(
    kind: str, tmp: Path, args: argparse.Namespace, work: Workload, workers: int = 1
) -> Figures:
    """All phases on one fresh database, served by ``workers`` processes (several need
    PostgreSQL, as ``onceover serve --workers`` does). ``args`` may lack ``readers``
    (then 1) and ``progress`` (then off)."""
    from onceover_backend.core.migrate import upgrade_to_head

    if workers > 1 and kind != "postgresql":
        raise ValueError(f"{workers} server workers need PostgreSQL, not {kind}")
    figures = Figures(kind if workers == 1 else f"{kind}, {workers} workers", events=work.events)
    print(f"\n{figures.database}:", flush=True)
    try:
        with database(kind, tmp, args.postgres_admin) as url:
            upgrade_to_head(url)
            if work.fill_events:
                progress = getattr(args, "progress", False)
                seconds, figures.fill_tenths = fill(url, work, args.fill_batch, progress=progress)
                figures.fill_rate = work.fill_events / seconds
                print(
                    f"  filled in-process: {work.fill_events:,} events made run by run and "
                    f"stored with ingest_events() ({args.fill_batch:,} a call, no server) in "
                    f"{seconds:.1f} s, {figures.fill_rate:,.0f} events/s; over each tenth: "
                    + (", ".join(f"{rate:,.0f}" for rate in figures.fill_tenths) or "n/a"),
                    flush=True,
                )
            with serving(url, workers) as (base, process):
                if work.http_events:
                    readers = Readers(base, read_endpoints(work), getattr(args, "readers", 1))
                    cpu_before = process.cpu_seconds()
                    seconds, post_ms, figures.tenths = post_all(base, work, readers)
                    figures.server_cpu_s = process.cpu_seconds() - cpu_before
                    figures.reads_under_ingest_ms = readers.timings
                    figures.ingest_seconds = seconds
                    figures.posted = work.http_events
                    figures.post_ms = post_ms
                    print(
                        f"  posted over HTTP: {work.http_events:,} events, {len(post_ms):,} "
                        f"POSTs of <= {args.batch} from {args.clients} clients to "
                        f"{workers} server process{'es' if workers > 1 else ''} in "
                        f"{seconds:.1f} s: {figures.ingest_rate:,.0f} events/s, POST "
                        f"p50 {percentile(post_ms, 0.5):.0f} ms, "
                        f"p95 {percentile(post_ms, 0.95):.0f} ms; server CPU "
                        f"{figures.server_us_per_event:.1f} us an event\n"
                        "  events/s over each tenth of the events posted: "
                        + ", ".join(f"{rate:,.0f}" for rate in figures.tenths),
                        flush=True,
                    )
                    print("  reads while ingest ran:", flush=True)
                    _print_reads(figures.reads_under_ingest_ms)
                figures.stored, figures.size_mb = stored_and_size(url)
                if figures.stored != work.events:
                    raise RuntimeError(
                        f"the database holds {figures.stored:,} events, {work.events:,} were sent"
                    )
                figures.reads_ms = time_reads(base, work, args.reads)
                print("  reads with ingest done:", flush=True)
                _print_reads(figures.reads_ms)
    except Exception as exc:
        figures.failed = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {kind}: {figures.failed}", flush=True)
        traceback.print_exc()
    return figures


def _print_reads(reads: dict[str, list[float]]) -> None:
    for label, values in reads.items():
        if values:
            print(
                f"    {label:<46} p50 {percentile(values, 0.5):8.1f} ms, "
                f"p95 {percentile(values, 0.95):8.1f} ms ({len(values)} reads)",
                flush=True,
            )
        else:
            print(f"    {label:<46} no read answered", flush=True)


# -- the report ---------------------------------------------------------------------


def _ms(values: list[float], share: float) -> float | None:
    return percentile(values, share) if values else None


def _tenth(tenths: list[float], index: int) -> float | None:
    return tenths[index] if len(tenths) == 10 else None


def slowest_read_p95(reads: dict[str, list[float]]) -> float | None:
    """The p95 of the slowest endpoint (None: no read answered)."""
    return max((percentile(values, 0.95) for values in reads.values() if values), default=None)


NOT_REACHED = "not reached"
"""A read under ingest with no figure: the readers did not reach it before ingest ended."""


class _Row(NamedTuple):
    """A line of the table: a figure per result, ``missing`` where one has none."""

    name: str
    values: list[float | None]
    fmt: str
    missing: str = "FAILED"


def report(results: list[Figures], labels: list[str]) -> None:
    """A column per result; ``labels`` the read endpoints, in order."""
    fill_rows = any(r.fill_rate for r in results)
    rows: list[_Row] = [
        _Row("events stored", [float(r.stored) if r.stored else None for r in results], ",.0f"),
        _Row("database size, MB", [r.size_mb for r in results], ",.0f"),
    ]
    if fill_rows:
        rows += [
            _Row("in-process fill, events/s", [r.fill_rate for r in results], ",.0f"),
            _Row(
                "  over the first tenth filled", [_tenth(r.fill_tenths, 0) for r in results], ",.0f"
            ),
            _Row(
                "  over the last tenth filled", [_tenth(r.fill_tenths, 9) for r in results], ",.0f"
            ),
        ]
    rows += [
        _Row("ingest over HTTP, events/s", [r.ingest_rate for r in results], ",.0f"),
        _Row("  over the first tenth posted", [_tenth(r.tenths, 0) for r in results], ",.0f"),
        _Row("  over the last tenth posted", [_tenth(r.tenths, 9) for r in results], ",.0f"),
        _Row("server CPU per event posted, us", [r.server_us_per_event for r in results], ",.1f"),
        _Row("POST p50, ms", [_ms(r.post_ms, 0.5) for r in results], ",.0f"),
        _Row("POST p95, ms", [_ms(r.post_ms, 0.95) for r in results], ",.0f"),
        # None: no reader ran (--readers 0), or none finished a read before ingest did.
        _Row("slowest read p95 under ingest, ms",
         [slowest_read_p95(r.reads_under_ingest_ms) for r in results], ",.1f", "none timed"),
        _Row("slowest read p95 idle, ms", [slowest_read_p95(r.reads_ms) for r in results], ",.1f"),
    ]  # fmt: skip
    for label in labels:
        for share, name in ((0.5, "p50"), (0.95, "p95")):
            under = [_ms(r.reads_under_ingest_ms.get(label, []), share) for r in results]
            if any(value is not None for value in under):
                # A read the readers did not reach before a short ingest ended has no
                # figure; that is not a failure (a failed read raises in Readers.stop).
                rows.append(_Row(f"{label} {name} under ingest, ms", under, ",.1f", NOT_REACHED))
            idle = [_ms(r.reads_ms.get(label, []), share) for r in results]
            rows.append(_Row(f"{label} {name}, ms", idle, ",.1f"))
    sizes = sorted({r.events for r in results})
    names = [r.database if len(sizes) == 1 else f"{r.database}, {r.events:,}" for r in results]
    both = len(results) == 2 and len(sizes) == 1
    heading = "| | " + " | ".join(names) + " |"
    rule = "|---|" + "---:|" * len(results)
    if both:
        heading += f" {names[1]} / {names[0]} |"
        rule += "---:|"
    print(f"\n{heading}\n{rule}")
    for name, values, fmt, missing in rows:
        cells = [missing if v is None else format(v, fmt) for v in values]
        line = f"| {name} | " + " | ".join(cells) + " |"
        if both:
            a, b = values
            line += f" {b / a:.2f} |" if a and b else " - |"
        print(line)
    if both and results[0].ingest_rate and results[1].ingest_rate:
        print(
            f"\ningest over HTTP: {results[1].database} / {results[0].database} = "
            f"{results[1].ingest_rate / results[0].ingest_rate:.2f}"
        )
    for small, large in growth(results):
        print(
            f"\ningest over HTTP, {large.database}: at {large.events:,} stored / at "
            f"{small.events:,} = {_ratio_text(large.ingest_rate, small.ingest_rate)}; "
            f"server CPU per event "
            f"{_ratio_text(large.server_us_per_event, small.server_us_per_event)}"
        )


def growth(results: list[Figures]) -> list[tuple[Figures, Figures]]:
    """Per database measured at several sizes: (smallest, largest)."""
    pairs = []
    for name in dict.fromkeys(r.database for r in results):
        mine = sorted((r for r in results if r.database == name), key=lambda r: r.events)
        if len(mine) > 1:
            pairs.append((mine[0], mine[-1]))
    return pairs


def _ratio_text(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def _sizes(text: str) -> list[int]:
    sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise ValueError(text)
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument(
        "--events", default="1000000",
        help="events stored in all; several sizes comma-separated (1000000,10000000)",
    )  # fmt: skip
    parser.add_argument(
        "--http-events",
        type=int,
        default=None,
        help="of those, the newest posted over HTTP (default: all); the rest are "
        "stored in-process first",
    )
    parser.add_argument("--databases", default=",".join(DATABASES))
    parser.add_argument("--clients", type=int, default=4, help="concurrent posting threads")
    parser.add_argument("--batch", type=int, default=500, help="events per POST")
    parser.add_argument("--fill-batch", type=int, default=5_000, help="events per in-process call")
    parser.add_argument("--reads", type=int, default=50, help="timed idle calls per read endpoint")
    parser.add_argument(
        "--readers", type=int, default=1, help="threads reading while ingest runs (0: none)"
    )
    parser.add_argument(
        "--server-workers",
        type=int,
        default=1,
        help="backend worker processes on PostgreSQL (onceover serve --workers); SQLite: 1",
    )
    parser.add_argument(
        "--run-every",
        type=float,
        default=RUN_EVERY_S,
        help=f"seconds between two runs' starts (default {RUN_EVERY_S:g}: about 5,800,000 "
        "events a day); 175 puts about 1,000,000 in a day, so that of two sizes the larger "
        "adds older history and the same last day",
    )
    parser.add_argument("--postgres-admin", default=POSTGRES_ADMIN, help="admin DSN")
    args = parser.parse_args()
    args.progress = True
    kinds = [kind.strip() for kind in args.databases.split(",") if kind.strip()]
    if not kinds or any(kind not in DATABASES for kind in kinds):
        parser.error(f"--databases takes a comma-separated subset of {','.join(DATABASES)}")
    try:
        sizes = _sizes(args.events)
    except ValueError:
        parser.error("--events takes one or more sizes >= 1, comma-separated")
    if (
        min(args.clients, args.batch, args.fill_batch, args.reads, args.server_workers) < 1
        or args.readers < 0
    ):
        parser.error(
            "--events, --clients, --batch, --fill-batch, --reads and --server-workers must "
            "be >= 1, --readers >= 0"
        )
    if not 0 < args.run_every <= MAX_RUN_EVERY_S:  # NaN and infinity too
        parser.error(f"--run-every must be seconds > 0 and <= {MAX_RUN_EVERY_S:,}")
    if args.http_events is not None and not 0 <= args.http_events <= min(sizes):
        parser.error("--http-events must be between 0 and --events")

    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), load "
        f"average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared: other work may "
        "run alongside)",
        flush=True,
    )
    results: list[Figures] = []
    labels: list[str] = []
    with tempfile.TemporaryDirectory(prefix="onceover-bench-") as tmp:
        for size in sizes:
            http_events = size if args.http_events is None else args.http_events
            started = time.perf_counter()
            work = build_workload(
                size, http_events, args.clients, args.batch, run_every_s=args.run_every
            )
            body_mb = sum(len(body) for queue in work.clients for _, body in queue) / 1e6
            assert work.first is not None
            assert work.last is not None
            print(
                f"\nevents: {work.events:,} in {work.runs:,} runs (~{work.events // work.runs:,} "
                f"each, {len(TABLES)} tables, one started every {args.run_every:g} s) from "
                f"{work.first:%Y-%m-%d %H:%M} to {work.last:%Y-%m-%d %H:%M} UTC, laid out in "
                f"{time.perf_counter() - started:.1f} s\n"
                f"store filled: the oldest {work.fill_events:,} in-process with ingest_events(), "
                f"then the newest {work.http_events:,} over HTTP ({body_mb:,.0f} MB of JSON, "
                f"{args.clients} clients, {args.batch} events a POST) while {args.readers} "
                f"reader(s) call every dashboard read; idle reads: {args.reads} timed calls "
                f"each, typical run {work.typical_run}",
                flush=True,
            )
            labels = list(read_endpoints(work))
            results += [
                bench_database(
                    kind, Path(tmp), args, work, args.server_workers if kind == "postgresql" else 1
                )
                for kind in kinds
            ]
    report(results, labels)
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if all(r.failed is None for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
