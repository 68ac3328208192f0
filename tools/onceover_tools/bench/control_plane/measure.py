"""Every phase on one fresh database: fill, ingest under reads, idle reads."""

from __future__ import annotations

import argparse
import traceback
from pathlib import Path

from onceover_tools.bench.control_plane.databases import database, stored_and_size
from onceover_tools.bench.control_plane.figures import Figures, percentile
from onceover_tools.bench.control_plane.ingest import fill, post_all
from onceover_tools.bench.control_plane.reads import (
    Readers,
    print_reads,
    read_endpoints,
    time_reads,
)
from onceover_tools.bench.control_plane.server import serving
from onceover_tools.bench.control_plane_workload import Workload


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
                    print_reads(figures.reads_under_ingest_ms)
                figures.stored, figures.size_mb = stored_and_size(url)
                if figures.stored != work.events:
                    raise RuntimeError(
                        f"the database holds {figures.stored:,} events, {work.events:,} were sent"
                    )
                figures.reads_ms = time_reads(base, work, args.reads)
                print("  reads with ingest done:", flush=True)
                print_reads(figures.reads_ms)
    except Exception as exc:
        figures.failed = f"{type(exc).__name__}: {exc}"
        print(f"FAILED: {kind}: {figures.failed}", flush=True)
        traceback.print_exc()
    return figures
