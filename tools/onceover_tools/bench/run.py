"""``onceover bench``: every figure in one run, on the same data and the same local BigQuery.

1. The writers (:mod:`onceover_tools.bench.writers`) at N and 4N rows: Onceover's three modes,
   ``pending`` monitored by a running backend, a slow one and one that is down, the
   seeds' per-row protobuf approach,
   legacy streaming inserts and the Arrow ceiling; each write counted in BigQuery. Then
   the stream economy (:mod:`onceover_tools.bench.stream_economy`, in a process of its own):
   the write streams a streaming query creates per hour in each mode, each mode's time
   per micro-batch, and (not with ``--quick``) a short soak of ``writeStream``'s default.
   Then the ledger stores (:mod:`onceover_tools.bench.ledger_stores`, in a process of its
   own): the object requests the same query's micro-batch makes of its ledger in an S3
   and a Cloud Storage bucket, per mode, their latency, whether their count stays flat as
   the ledger fills, and what they cost an hour at list price.
2. The control plane (:mod:`onceover_tools.bench.control_plane`): events posted over HTTP to a
   real server on SQLite and on PostgreSQL while the dashboard's reads are timed, then
   read latencies with them all stored;
   and in trouble (:mod:`onceover_tools.bench.starvation`): ingest while BigQuery hangs and
   ``/api/health`` is flooded, against ingest on a quiet backend.
3. The report (:mod:`onceover_tools.bench.report`): the targets with every ratio, the tables,
   written as Markdown and JSON and printed.

A missed target is reported, not raised: figures are not assertions. The exit status is
1 only when a figure could not be taken (a write that failed or lost rows, a database
that failed).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from onceover_tools.bench import control_plane as cp
from onceover_tools.bench import ledger_stores as ls
from onceover_tools.bench import report
from onceover_tools.bench import starvation as st
from onceover_tools.bench import stream_economy as se
from onceover_tools.bench.provenance import current_commit, machine
from onceover_tools.bench.slow_backend import SlowBackend
from onceover_tools.bench.writers import Backends, Monitor, WriterFigure, quiet_spark, run_writers

QUICK_ROWS = 20_000
FULL_ROWS = 250_000
QUICK_EVENTS = 100_000
FULL_EVENTS = 1_000_000
STARVATION_EVENTS = 100_000  # per phase, at most
QUICK_ECONOMY_BATCHES = 20
FULL_ECONOMY_BATCHES = se.BATCHES
FULL_ECONOMY_SOAK_MINUTES = 5.0  # `python -m onceover_tools.bench.stream_economy` alone: 20
GROWTH = 4
FULL_MONITORING_ROUNDS = 21
"""Rounds of plain ``pending`` and each monitored write (docs/journal/profiling.md: single
writes varied by 10-20% against the 3% held to; three medians did not resolve it)."""
QUICK_MONITORING_ROUNDS = 3


@dataclass(frozen=True)
class BenchPlan:
    """What one ``onceover bench`` measures and where it writes the figures."""

    rows: int
    repeat: int
    events: int
    databases: tuple[str, ...]
    out: Path
    postgres_admin: str
    quick: bool
    micro_batches: int | None = None
    """Micro-batches per mode of the stream economy; None: by the bench's size."""
    soak_minutes: float | None = None
    """How long the stream economy's soak runs (0: none); None: by the bench's size."""
    monitoring_rounds: int | None = None
    """Rounds of plain ``pending`` and each monitored write; None: by the bench's size."""
    ledger_batches: int | None = None
    """Micro-batches per mode and store of the ledger-store bench; None: by the bench's size."""
    ledger_stores: tuple[str, ...] = ls.DEFAULT_STORES
    """Where the ledger-store bench keeps the ledgers (``posix``, the disk, when asked)."""
    ledger_modes: tuple[str, ...] = ls.MODES

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BenchPlan:
        quick = bool(args.quick)
        return cls(
            rows=args.rows or (QUICK_ROWS if quick else FULL_ROWS),
            repeat=args.repeat or (1 if quick else 3),
            events=args.events or (QUICK_EVENTS if quick else FULL_EVENTS),
            databases=tuple(args.databases),
            out=Path(args.out),
            postgres_admin=args.postgres_admin,
            quick=quick,
            micro_batches=getattr(args, "micro_batches", None),
            soak_minutes=getattr(args, "soak_minutes", None),
            monitoring_rounds=getattr(args, "monitoring_rounds", None),
            ledger_batches=getattr(args, "ledger_batches", None),
            ledger_stores=tuple(getattr(args, "ledger_stores", None) or ls.DEFAULT_STORES),
            ledger_modes=tuple(getattr(args, "ledger_modes", None) or ls.MODES),
        )

    @property
    def sizes(self) -> list[int]:
        return [self.rows, self.rows * GROWTH]

    @property
    def full_size(self) -> bool:
        """Neither ``--quick`` nor made smaller with ``--rows``: the stream economy's soak
        and its 60 micro-batches per mode belong to a full bench only."""
        return not self.quick and self.rows >= FULL_ROWS

    @property
    def rounds(self) -> int:
        """Monitoring rounds (many for a full bench only, as the soak); every attempt is
        one, so never fewer than ``repeat``."""
        if self.monitoring_rounds is not None:
            chosen = self.monitoring_rounds
        else:
            chosen = FULL_MONITORING_ROUNDS if self.full_size else QUICK_MONITORING_ROUNDS
        return max(chosen, self.repeat)

    @property
    def economy_batches(self) -> int:
        if self.micro_batches is not None:
            return self.micro_batches
        return FULL_ECONOMY_BATCHES if self.full_size else QUICK_ECONOMY_BATCHES

    @property
    def ledger_micro_batches(self) -> int:
        if self.ledger_batches is not None:
            return self.ledger_batches
        return ls.BATCHES if self.full_size else ls.QUICK_BATCHES

    @property
    def economy_soak_minutes(self) -> float:
        if self.soak_minutes is not None:
            return self.soak_minutes
        return FULL_ECONOMY_SOAK_MINUTES if self.full_size else 0.0

    @property
    def markdown_path(self) -> Path:
        return self.out / "BENCHMARKS.md"

    @property
    def json_path(self) -> Path:
        return self.out / "benchmarks.json"


def say(line: str) -> None:
    print(line, flush=True)


def measure_writers(plan: BenchPlan, tmp: Path) -> list[WriterFigure]:
    """The writers, with a local BigQuery in this process and three backends beside it:
    a running one, a slow one, and a port nothing listens on. The sink spools into the
    bench's own folder, never the user's."""
    from onceover_jobs.outbox import SPOOL_DIR_ENV

    from onceover.preflight import free_port
    from onceover_tools.localbq import LocalBigQuery
    from onceover_tools.stack import BackendProcess

    tokens = {"ingest": secrets.token_urlsafe(16), "viewer": secrets.token_urlsafe(16)}
    spool = tmp / "spool"
    with LocalBigQuery() as server, _environment(SPOOL_DIR_ENV, str(spool)), SlowBackend() as slow:
        os.environ.update(server.config.env())  # before the session: Python workers inherit it
        with BackendProcess(
            bigquery=server.config,
            log_path=tmp / "backend.log",
            database_url=f"sqlite:///{tmp / 'monitor.db'}",
            tokens=tokens,
        ) as backend:
            monitor = Monitor(backend.url, tokens["ingest"], tokens["viewer"])
            backends = Backends(monitor, slow, f"http://127.0.0.1:{free_port()}", spool)
            return run_writers(
                plan.sizes, plan.repeat, server.config, backends, say,
                monitoring_rounds=plan.rounds,
            )  # fmt: skip


@contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``name`` set to ``value`` (before the Spark session: its Python workers inherit
    it), as it was afterwards: later phases must not spool into a folder that is gone."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def measure_control_plane(plan: BenchPlan, tmp: Path) -> list[cp.Figures]:
    started = time.perf_counter()
    work = cp.build_workload(plan.events, plan.events, 4, 500)
    say(
        f"{work.events:,} events in {work.runs:,} runs built in "
        f"{time.perf_counter() - started:.1f} s; posted over HTTP by 4 clients, 500 a POST"
    )
    args = argparse.Namespace(
        postgres_admin=plan.postgres_admin,
        fill_batch=5_000,
        batch=500,
        clients=4,
        reads=50,
        readers=1,  # the dashboard's reads while ingest runs: the read target's figure
        progress=False,
    )
    # PostgreSQL also as production serves it on two cores: `onceover serve --workers 2`.
    served = [(kind, 1) for kind in plan.databases]
    if "postgresql" in plan.databases:
        served.append(("postgresql", 2))
    return [cp.bench_database(kind, tmp, args, work, workers) for kind, workers in served]


def measure_starvation(plan: BenchPlan, tmp: Path) -> st.Starvation:
    """Ingest quiet, with BigQuery hanging, and with /api/health flooded as well."""
    events = min(plan.events, STARVATION_EVENTS)
    return st.measure(tmp, events, 4, 500, st.FLOOD)


def measure_stream_economy(plan: BenchPlan, tmp: Path) -> se.Economy:
    """In a process of its own: its Spark session needs a JVM started with its own local
    BigQuery (this process's JVM has the writers' endpoint in its environment)."""
    return se.measure_in_child(tmp / "stream-economy", plan.economy_batches,
                               plan.economy_soak_minutes, say)  # fmt: skip


def measure_ledger_stores(plan: BenchPlan, tmp: Path) -> ls.LedgerStores:
    """In a process of its own: every process of its Spark session must reach the stores
    through the bench's counting proxies, so its JVM starts with their endpoints."""
    return ls.measure_in_child(tmp / "ledger-stores", plan.ledger_micro_batches,
                               plan.ledger_stores, plan.ledger_modes, say)  # fmt: skip


def _control_plane_json(figures: cp.Figures) -> dict[str, Any]:
    return {
        "database": figures.database,
        "events_stored": figures.stored,
        "ingest_events_per_s": figures.ingest_rate,
        "ingest_tenths_events_per_s": figures.tenths,
        "post_p95_ms": cp.percentile(figures.post_ms, 0.95) if figures.post_ms else None,
        "read_p95_ms": {
            label: cp.percentile(values, 0.95) for label, values in figures.reads_ms.items()
        },
        "read_p95_under_ingest_ms": {
            label: cp.percentile(values, 0.95) if values else None
            for label, values in figures.reads_under_ingest_ms.items()
        },
        "server_cpu_us_per_event": figures.server_us_per_event,
        "failed": figures.failed,
    }


def render(
    plan: BenchPlan,
    writers: list[WriterFigure],
    databases: list[cp.Figures],
    header: dict[str, Any],
    starvation: st.Starvation | None = None,
    *,
    economy: se.Economy | None = None,
    ledgers: ls.LedgerStores | None = None,
) -> tuple[str, dict[str, Any]]:
    """The Markdown report and the JSON document of one bench."""
    by_size = {
        size: report.writer_targets({f.key: f for f in writers if f.rows == size})
        for size in plan.sizes
    }
    shared = report.control_plane_targets(databases) + report.starvation_targets(starvation)
    streams = report.stream_economy_targets(economy)
    ledger = report.ledger_store_targets(ledgers)
    lines = [
        "# Benchmarks",
        "",
        f"`{header['command']}` on {header['generated_at']}, commit {header['commit']}; "
        f"{header['machine']}. Spark `local[2]`, the local BigQuery (bqemulator) in the "
        f"bench's process; median of {plan.repeat} run(s) per writer and size "
        f"({plan.rounds} for `pending` and its monitored writes, in paired rounds), every write "
        "counted in BigQuery (`COUNT(*)` and `COUNT(DISTINCT event_id)`) before its figure "
        "is kept. Figures, not assertions: a missed target is shown as missed.",
        "",
        "## Targets",
        "",
        *report.targets_section(by_size, streams + ledger + shared),
        "",
        "## Figures",
        "",
        *report.writers_section(writers, plan.sizes),
        "",
        *report.monitoring_section(writers, plan.sizes),
        "",
        *([*report.stream_economy_section(economy), ""] if economy is not None else []),
        *([*ls.section(ledgers), ""] if ledgers is not None else []),
        *report.control_plane_section(databases, plan.events),
        "",
        *([*report.starvation_section(starvation), ""] if starvation is not None else []),
    ]
    document = {
        **header,
        "rows": plan.sizes,
        "repeat": plan.repeat,
        "monitoring_rounds": plan.rounds,
        "events": plan.events,
        "writers": [figure.as_json() for figure in writers],
        "control_plane": [_control_plane_json(db) for db in databases],
        "starvation": starvation.as_json() if starvation is not None else None,
        "stream_economy": economy.as_json() if economy is not None else None,
        "ledger_stores": ledgers.as_json() if ledgers is not None else None,
        "targets": {
            **{str(size): [t.as_json() for t in targets] for size, targets in by_size.items()},
            "control_plane": [t.as_json() for t in shared],
            "stream_economy": [t.as_json() for t in streams],
            "ledger_stores": [t.as_json() for t in ledger],
        },
    }
    return "\n".join(lines), document


def run_bench(plan: BenchPlan, command: str) -> int:
    header = {
        "command": command,
        "generated_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": current_commit(),
        "machine": machine(),
        "quick": plan.quick,
    }
    say(f"onceover bench: {header['machine']}")
    say(
        f"[1/5] writers at {plan.sizes[0]:,} and {plan.sizes[1]:,} rows, {plan.repeat} run(s) "
        f"each; {plan.rounds} rounds of `pending` and its monitored writes"
    )
    quiet_spark()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onceover-bench-") as tmp:
        writers = measure_writers(plan, Path(tmp))
        soak = f", a {plan.economy_soak_minutes:g}-min soak" if plan.economy_soak_minutes else ""
        say(f"[2/5] stream economy: {plan.economy_batches} micro-batches per mode{soak}")
        economy = measure_stream_economy(plan, Path(tmp))
        say(
            f"[3/5] ledger stores: {plan.ledger_micro_batches} micro-batches per mode and store "
            f"({', '.join(plan.ledger_stores)}; {', '.join(plan.ledger_modes)})"
        )
        ledgers = measure_ledger_stores(plan, Path(tmp))
        say(
            f"[4/5] control plane: {plan.events:,} events on {', '.join(plan.databases)}"
            + (
                " (PostgreSQL also with 2 server processes)"
                if "postgresql" in plan.databases
                else ""
            )
        )
        databases = measure_control_plane(plan, Path(tmp))
        say(
            "[4/5] control plane in trouble: ingest quiet, with BigQuery hanging, and with "
            f"/api/health flooded as well ({st.FLOOD} callers)"
        )
        starvation = measure_starvation(plan, Path(tmp))
    markdown, document = render(
        plan, writers, databases, header, starvation, economy=economy, ledgers=ledgers
    )
    say(f"[5/5] report ({time.perf_counter() - started:.0f} s in all)\n")
    say(markdown)
    plan.out.mkdir(parents=True, exist_ok=True)
    plan.markdown_path.write_text(markdown)
    plan.json_path.write_text(json.dumps(document, indent=2) + "\n")
    say(f"written: {plan.markdown_path}, {plan.json_path}")
    failed = [f for f in writers if f.median is None] + [d for d in databases if d.failed]
    return 1 if failed or starvation.failed or economy.any_failed or ledgers.any_failed else 0
