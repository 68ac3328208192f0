"""Ingest throughput and read latency of the control plane, SQLite against PostgreSQL.

    .venv/bin/python -m onceover_tools.bench.control_plane [--events 1000000] [--http-events N]
        [--databases sqlite,postgresql] [--clients 4] [--batch 500] [--reads 50]
        [--server-workers 1]

The events look like real runs: about 2,000 per run (``run_started``, four micro-batches
of four pending streams, each ``stream_created``, ~120 appends acknowledged, some
``append_already_exists``, a few ``append_error`` UNAVAILABLE, ``stream_finalized``,
then ``batch_intent`` and ``batch_committed``; heartbeats every 30 s; ``run_finished``,
or ``run_failed`` for one run in 25), each run ~16 minutes long, one starting every
30 s over the hours before now, across eight tables. They are built with the shared
schema (:mod:`onceover.events`) once and encoded as ``POST /api/events`` bodies.

For each database (SQLite: a file in a temp dir; PostgreSQL: a fresh database on
``--postgres-admin``, dropped at the end) migrated to head:

1. the oldest ``events - http_events`` events are stored in-process with
   :func:`onceover_backend.services.ingest.ingest_events` (``--fill-batch`` events a call,
   no server running), its rate printed for comparison;
2. the backend is started as a real server (uvicorn in a child process of its own, so
   the clients do not share its GIL; on PostgreSQL, ``--server-workers`` processes
   of ``onceover serve --workers``) and the newest ``http_events`` are posted over
   HTTP, ``--batch`` events a POST, from ``--clients`` threads with their own
   ``httpx.Client``, each thread posting its own runs: events/s over the wall time
   and per-POST latency;
3. with every event stored, each read endpoint is called ``--reads`` times (after three
   untimed calls) one after the other: p50/p95 latency.

Figures are printed side by side at the end; none is asserted. Exits 1 when a database
failed (a POST or read that did not answer 200, or a wrong count of stored events).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from onceover import events as ev
from onceover.bigquery import BigQueryConfig
from onceover.processes import ChildProcess
from onceover.waiting import poll_until

DATABASES = ("sqlite", "postgresql")
POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"
TOKENS = {
    "ingest": "bench-ingest-token-0123456789",
    "viewer": "bench-viewer-token-0123456789",
    "operator": "bench-operator-token-0123456789",
}
SERVER_START_S = 60.0

# The shape of one run (see the module docstring).
PROJECT = "bench-project"
TABLES = tuple(f"{PROJECT}.sales.orders_{n}" for n in range(8))
BATCHES = 4
STREAMS = 4
APPENDS = 120
APPEND_EVERY_S = 2.0
HEARTBEAT_EVERY_S = 30.0
RUN_EVERY_S = 30.0
ROWS_PER_APPEND = 5_000
BYTES_PER_ROW = 120
ALREADY_EXISTS_SHARE = 0.03
UNAVAILABLE_SHARE = 0.005
FAIL_EVERY = 25  # run i with i % FAIL_EVERY == FAIL_AT fails in its third batch
FAIL_AT = 7
BATCH_S = APPENDS * APPEND_EVERY_S + 10  # seconds of one micro-batch
RUN_S = 5 + BATCHES * BATCH_S  # seconds from a run's start to its end


# -- the events ---------------------------------------------------------------------


class _Run:
    """Builds the events of one run (one attempt) as its job would send them."""

    def __init__(self, index: int, start: datetime) -> None:
        self.index = index
        self.start = start
        self.run_id = f"bench-{index:06d}"
        self.table = TABLES[index % len(TABLES)]
        self.query_id = f"q-{index:06d}"
        self.attempt = "a1"
        self.rng = random.Random(index)  # noqa: S311 - reproducible noise, not crypto
        self.fails = index % FAIL_EVERY == FAIL_AT
        self.events: list[ev.Event] = []

    def common(self, kind: str, seconds: float, *facts: object) -> dict[str, Any]:
        return {
            "id": ev.event_id(self.run_id, kind, *facts),
            "time": self.start + timedelta(seconds=seconds),
            "run_id": self.run_id,
            "table": self.table,
            "job": f"orders_{self.index % len(TABLES)}",
        }

    def stream(self, batch: int, partition: int, begin: float, appends: int) -> int:
        """One executor's stream: created, appended to, finalized unless cut short;
        returns the rows appended."""
        fields: dict[str, Any] = {
            "mode": "pending",
            "query_id": self.query_id,
            "batch_id": batch,
            "partition": partition,
            "attempt": 0,
            "stream": f"{self.run_id}/b{batch}/p{partition}",
            "stream_type": "PENDING",
        }
        name = fields["stream"]
        add = self.events.append
        add(ev.StreamCreated(**fields, **self.common("created", begin + partition * 0.1, name)))
        offset = 0
        t = begin
        for number in range(appends):
            t = begin + 1 + number * APPEND_EVERY_S + partition * 0.1
            if self.rng.random() < UNAVAILABLE_SHARE:
                add(ev.AppendError(
                    code="UNAVAILABLE", offset=offset, rows=ROWS_PER_APPEND, retrying=True,
                    message="the service is currently unavailable",
                    **fields, **self.common("error", t, name, offset, "UNAVAILABLE"),
                ))  # fmt: skip
                t += 0.5
            add(ev.AppendAcknowledged(
                offset=offset, rows=ROWS_PER_APPEND, bytes=ROWS_PER_APPEND * BYTES_PER_ROW,
                latency_ms=round(self.rng.uniform(20, 150), 1),
                **fields, **self.common("acked", t, name, offset),
            ))  # fmt: skip
            if self.rng.random() < ALREADY_EXISTS_SHARE:  # a retry after a lost acknowledgement
                add(ev.AppendAlreadyExists(
                    offset=offset, rows=ROWS_PER_APPEND,
                    **fields, **self.common("exists", t + 0.3, name, offset),
                ))  # fmt: skip
            offset += ROWS_PER_APPEND
        if appends < APPENDS:  # the task dies: its job fails
            if partition == 0:
                add(ev.AppendError(
                    code="INTERNAL", offset=offset, rows=ROWS_PER_APPEND, retrying=False,
                    message="internal error",
                    **fields, **self.common("error", t + 1, name, offset, "INTERNAL"),
                ))  # fmt: skip
            return offset
        finalized_at = begin + BATCH_S - 8
        add(
            ev.StreamFinalized(
                row_count=offset, **fields, **self.common("final", finalized_at, name)
            )
        )
        return offset

    def batch(self, batch: int, end: float, streams: list[ev.StreamRows]) -> None:
        rows = sum(s.rows for s in streams)
        fields: dict[str, Any] = {"mode": "pending", "query_id": self.query_id, "batch_id": batch}
        self.events.append(ev.BatchIntent(
            streams=streams, expected_rows=rows, **fields, **self.common("intent", end - 5, batch)
        ))  # fmt: skip
        self.events.append(ev.BatchCommitted(
            streams=streams, rows=rows, duration_ms=round(self.rng.uniform(200, 2000), 1),
            **fields, **self.common("committed", end - 3, batch),
        ))  # fmt: skip

    def build(self) -> list[ev.Event]:
        """The run's events by time: started, four batches (or a failure), heartbeats, end."""
        attempt = self.attempt
        spec = ev.JobSpec(
            module="onceover_jobs.load_files", args=["--table", self.table], checkpoint="/c"
        )
        self.events.append(ev.RunStarted(
            attempt_id=attempt, mode="pending", spec=spec, query_id=self.query_id,
            **self.common("started", 0, attempt),
        ))  # fmt: skip
        commits: list[tuple[float, int]] = []  # (when, rows) of each committed batch
        end = 0.0
        for batch in range(BATCHES):
            begin = 5 + batch * BATCH_S
            failing = self.fails and batch == 2
            appends = APPENDS // 2 if failing else APPENDS
            streams = []
            for partition in range(STREAMS):
                rows = self.stream(batch, partition, begin, appends)
                streams.append(ev.StreamRows(
                    stream=f"{self.run_id}/b{batch}/p{partition}", rows=rows,
                    bytes=rows * BYTES_PER_ROW, partition=partition, attempt=0,
                ))  # fmt: skip
            if failing:
                end = begin + appends * APPEND_EVERY_S + 5
                break
            end = begin + BATCH_S
            self.batch(batch, end, streams)
            commits.append((end - 3, sum(s.rows for s in streams)))
        beat = 1
        while beat * HEARTBEAT_EVERY_S < end:
            t = beat * HEARTBEAT_EVERY_S
            done = [rows for when, rows in commits if when <= t]
            self.events.append(ev.RunHeartbeat(
                attempt_id=attempt, rows_committed=sum(done), batches_committed=len(done),
                **self.common("beat", t, attempt, beat),
            ))  # fmt: skip
            beat += 1
        total = sum(rows for _, rows in commits)
        if self.fails:
            self.events.append(ev.RunFailed(
                attempt_id=attempt, rows_committed=total,
                error="Job aborted: append failed with INTERNAL on stream p0 of batch 2",
                **self.common("failed", end, attempt),
            ))  # fmt: skip
        else:
            self.events.append(ev.RunFinished(
                attempt_id=attempt, rows_committed=total, batches_committed=len(commits),
                **self.common("finished", end, attempt),
            ))  # fmt: skip
        return sorted(self.events, key=lambda e: e.time)


def _run_events(index: int, start: datetime) -> list[ev.Event]:
    """The events of run ``index``, started at ``start``, by time."""
    return _Run(index, start).build()


@dataclass
class Workload:
    """Every event, as ``POST /api/events`` bodies of ``batch`` events.

    ``fill`` holds the oldest runs' bodies (stored in-process); ``clients[c]`` the
    bodies client ``c`` posts: the newest runs, dealt out one run at a time.
    """

    events: int
    runs: int
    fill_events: int
    fill: list[bytes] = field(default_factory=list)
    clients: list[list[tuple[int, bytes]]] = field(default_factory=list)
    typical_run: str = ""
    first: datetime | None = None
    last: datetime | None = None

    @property
    def http_events(self) -> int:
        return self.events - self.fill_events


def _encode(events: list[ev.Event]) -> bytes:
    return json.dumps([event.model_dump(mode="json") for event in events]).encode()


def build_workload(total: int, http_events: int, clients: int, batch: int) -> Workload:
    """Runs of ~2,000 events until ``total``; the last run is cut short (still running)."""
    sample = [len(_run_events(n, datetime(2026, 1, 1, tzinfo=UTC))) for n in range(FAIL_EVERY)]
    runs = math.ceil(total / (sum(sample) / len(sample)))  # about; the loop makes it exact
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    # The last run ends about ten minutes ago; the first starts hours earlier.
    first_start = now - timedelta(seconds=(runs - 1) * RUN_EVERY_S + RUN_S + 600)
    fill_events = total - http_events
    work = Workload(events=total, runs=0, fill_events=fill_events)
    work.clients = [[] for _ in range(clients)]
    typical = runs // 2 + (1 if (runs // 2) % FAIL_EVERY == FAIL_AT else 0)  # mid-aged, succeeded
    pending: list[ev.Event] = []  # fill events not yet encoded
    unsent: list[list[ev.Event]] = [[] for _ in range(clients)]  # each client's, likewise
    produced = 0
    http_runs = 0
    index = 0
    while produced < total:
        events = _run_events(index, first_start + timedelta(seconds=index * RUN_EVERY_S))
        events = events[: total - produced]
        if index == typical or not work.typical_run:
            work.typical_run = events[0].run_id
        if work.first is None:
            work.first = events[0].time
        work.last = max(work.last or events[-1].time, events[-1].time)
        to_fill = max(0, min(len(events), fill_events - produced))
        produced += len(events)
        pending.extend(events[:to_fill])
        while len(pending) >= batch:
            work.fill.append(_encode(pending[:batch]))
            del pending[:batch]
        if to_fill < len(events):
            client = http_runs % clients
            http_runs += 1
            unsent[client].extend(events[to_fill:])
            while len(unsent[client]) >= batch:
                work.clients[client].append((batch, _encode(unsent[client][:batch])))
                del unsent[client][:batch]
        index += 1
    work.runs = index
    if pending:
        work.fill.append(_encode(pending))
    for client, rest in enumerate(unsent):
        if rest:
            work.clients[client].append((len(rest), _encode(rest)))
    return work


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
        yield base
    finally:
        process.stop()


def _bearer(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


# -- the phases ---------------------------------------------------------------------


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (``share`` 0..1) of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Figures:
    """What one database measured; ``None`` where a phase did not run."""

    database: str
    stored: int = 0
    size_mb: float | None = None
    fill_rate: float | None = None
    ingest_seconds: float | None = None
    posted: int = 0
    post_ms: list[float] = field(default_factory=list)
    tenths: list[float] = field(default_factory=list)  # events/s over each tenth posted
    reads_ms: dict[str, list[float]] = field(default_factory=dict)
    failed: str | None = None

    @property
    def ingest_rate(self) -> float | None:
        if not self.ingest_seconds or not self.posted:
            return None
        return self.posted / self.ingest_seconds


def fill(database_url: str, work: Workload, batch: int) -> float:
    """Store ``work.fill`` in-process, ``batch`` events a transaction; returns seconds."""
    from onceover_backend.core.db import build_engine
    from onceover_backend.services.ingest import ingest_events

    engine = build_engine(database_url)
    started = time.perf_counter()
    pending: list[ev.Event] = []
    try:
        for body in work.fill:
            pending.extend(ev.EVENT_LIST.validate_json(body))
            if len(pending) >= batch:
                ingest_events(engine, pending)
                pending = []
        if pending:
            ingest_events(engine, pending)
    finally:
        engine.dispose()
    return time.perf_counter() - started


def post_all(base: str, work: Workload) -> tuple[float, list[float], list[float]]:
    """Post every client's bodies from its own thread: the wall seconds, each POST's
    milliseconds, and the events/s over each tenth of the events posted."""
    latencies: list[list[float]] = [[] for _ in work.clients]
    done: list[tuple[float, int]] = []  # (seconds since the start, events) of each POST
    errors: list[str] = []
    start = [0.0]  # set when every client is ready, before any POST
    gate = threading.Barrier(
        len(work.clients) + 1, action=lambda: start.__setitem__(0, time.perf_counter())
    )

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


def read_endpoints(work: Workload) -> dict[str, tuple[str, dict[str, str | int]]]:
    """Label -> (path, query) of each timed read."""
    return {
        "GET /api/runs": ("/api/runs", {}),
        "GET /api/runs?status=succeeded&limit=50": (
            "/api/runs",
            {"status": "succeeded", "limit": 50},
        ),
        "GET /api/runs/{run_id}": (f"/api/runs/{work.typical_run}", {}),
        "GET /api/metrics/write-errors?run_id=": (
            "/api/metrics/write-errors",
            {"run_id": work.typical_run},
        ),
        "GET /api/metrics/write-errors?table=&step=5m": (
            "/api/metrics/write-errors",
            {"table": TABLES[0], "step": "5m"},
        ),
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
    PostgreSQL, as ``onceover serve --workers`` does)."""
    from onceover_backend.core.migrate import upgrade_to_head

    if workers > 1 and kind != "postgresql":
        raise ValueError(f"{workers} server workers need PostgreSQL, not {kind}")
    figures = Figures(kind if workers == 1 else f"{kind}, {workers} workers")
    print(f"\n{figures.database}:", flush=True)
    try:
        with database(kind, tmp, args.postgres_admin) as url:
            upgrade_to_head(url)
            if work.fill:
                seconds = fill(url, work, args.fill_batch)
                figures.fill_rate = work.fill_events / seconds
                print(
                    f"  filled in-process: {work.fill_events:,} events with ingest_events() "
                    f"({args.fill_batch:,} a call, no server) in {seconds:.1f} s, "
                    f"{figures.fill_rate:,.0f} events/s",
                    flush=True,
                )
            with server(url, workers) as base:
                if work.http_events:
                    seconds, post_ms, figures.tenths = post_all(base, work)
                    figures.ingest_seconds = seconds
                    figures.posted = work.http_events
                    figures.post_ms = post_ms
                    print(
                        f"  posted over HTTP: {work.http_events:,} events, {len(post_ms):,} "
                        f"POSTs of <= {args.batch} from {args.clients} clients to "
                        f"{workers} server process{'es' if workers > 1 else ''} in "
                        f"{seconds:.1f} s: {figures.ingest_rate:,.0f} events/s, POST "
                        f"p50 {percentile(post_ms, 0.5):.0f} ms, "
                        f"p95 {percentile(post_ms, 0.95):.0f} ms\n"
                        "  events/s over each tenth of the events posted: "
                        + ", ".join(f"{rate:,.0f}" for rate in figures.tenths),
                        flush=True,
                    )
                figures.stored, figures.size_mb = stored_and_size(url)
                if figures.stored != work.events:
                    raise RuntimeError(
                        f"the database holds {figures.stored:,} events, {work.events:,} were sent"
                    )
                figures.reads_ms = time_reads(base, work, args.reads)
                for label, values in figures.reads_ms.items():
                    print(
                        f"  {label:<46} p50 {percentile(values, 0.5):8.1f} ms, "
                        f"p95 {percentile(values, 0.95):8.1f} ms",
                        flush=True,
                    )
    except Exception as exc:
        figures.failed = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {kind}: {figures.failed}", flush=True)
        traceback.print_exc()
    return figures


# -- the report ---------------------------------------------------------------------


def _ms(values: list[float], share: float) -> float | None:
    return percentile(values, share) if values else None


def _tenth(figures: Figures, index: int) -> float | None:
    return figures.tenths[index] if len(figures.tenths) == 10 else None


def report(results: list[Figures], work: Workload) -> None:
    rows: list[tuple[str, list[float | None], str]] = [
        ("events stored", [float(r.stored) if r.stored else None for r in results], ",.0f"),
        ("database size, MB", [r.size_mb for r in results], ",.0f"),
    ]
    if work.fill_events:
        rows.append(("in-process fill, events/s", [r.fill_rate for r in results], ",.0f"))
    rows += [
        ("ingest over HTTP, events/s", [r.ingest_rate for r in results], ",.0f"),
        ("  over the first tenth posted", [_tenth(r, 0) for r in results], ",.0f"),
        ("  over the last tenth posted", [_tenth(r, 9) for r in results], ",.0f"),
        ("POST p50, ms", [_ms(r.post_ms, 0.5) for r in results], ",.0f"),
        ("POST p95, ms", [_ms(r.post_ms, 0.95) for r in results], ",.0f"),
    ]
    labels = list(read_endpoints(work))
    for label in labels:
        for share, name in ((0.5, "p50"), (0.95, "p95")):
            values = [_ms(r.reads_ms.get(label, []), share) for r in results]
            rows.append((f"{label} {name}, ms", values, ",.1f"))
    both = len(results) == 2
    heading = "| | " + " | ".join(r.database for r in results) + " |"
    rule = "|---|" + "---:|" * len(results)
    if both:
        heading += f" {results[1].database} / {results[0].database} |"
        rule += "---:|"
    print(f"\n{heading}\n{rule}")
    for name, values, fmt in rows:
        cells = ["FAILED" if v is None else format(v, fmt) for v in values]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="events stored in all")
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
    parser.add_argument("--reads", type=int, default=50, help="timed calls per read endpoint")
    parser.add_argument(
        "--server-workers",
        type=int,
        default=1,
        help="backend worker processes on PostgreSQL (onceover serve --workers); SQLite: 1",
    )
    parser.add_argument("--postgres-admin", default=POSTGRES_ADMIN, help="admin DSN")
    args = parser.parse_args()
    kinds = [kind.strip() for kind in args.databases.split(",") if kind.strip()]
    if not kinds or any(kind not in DATABASES for kind in kinds):
        parser.error(f"--databases takes a comma-separated subset of {','.join(DATABASES)}")
    if (
        min(args.events, args.clients, args.batch, args.fill_batch, args.reads, args.server_workers)
        < 1
    ):
        parser.error(
            "--events, --clients, --batch, --fill-batch, --reads and --server-workers must be >= 1"
        )
    http_events = args.events if args.http_events is None else args.http_events
    if not 0 <= http_events <= args.events:
        parser.error("--http-events must be between 0 and --events")

    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), load "
        f"average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (shared: other work may "
        "run alongside)",
        flush=True,
    )
    started = time.perf_counter()
    work = build_workload(args.events, http_events, args.clients, args.batch)
    size = sum(len(body) for body in work.fill) + sum(
        len(body) for queue in work.clients for _, body in queue
    )
    assert work.first is not None
    assert work.last is not None
    print(
        f"events: {work.events:,} in {work.runs:,} runs (~{work.events // work.runs:,} each, "
        f"{len(TABLES)} tables) from {work.first:%Y-%m-%d %H:%M} to {work.last:%H:%M} UTC, "
        f"{size / 1e6:,.0f} MB of JSON, built in {time.perf_counter() - started:.1f} s\n"
        f"store filled: the oldest {work.fill_events:,} in-process with ingest_events(), then "
        f"the newest {work.http_events:,} over HTTP ({args.clients} clients, {args.batch} "
        f"events a POST); reads: {args.reads} timed calls each, typical run {work.typical_run}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="onceover-bench-") as tmp:
        results = [
            bench_database(
                kind, Path(tmp), args, work, args.server_workers if kind == "postgresql" else 1
            )
            for kind in kinds
        ]
    report(results, work)
    load = os.getloadavg()
    print(f"\nload average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0 if all(r.failed is None for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
