"""The command line: ``python -m onceover_tools.bench.control_plane [options]``."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from onceover_tools.bench import control_plane
from onceover_tools.bench.control_plane.databases import DATABASES, POSTGRES_ADMIN
from onceover_tools.bench.control_plane.figures import Figures
from onceover_tools.bench.control_plane.measure import bench_database
from onceover_tools.bench.control_plane.reads import read_endpoints
from onceover_tools.bench.control_plane.report import report
from onceover_tools.bench.control_plane_workload import RUN_EVERY_S, TABLES, build_workload

MAX_RUN_EVERY_S = 86_400  # a run a day: 10,000,000 events then span 13 years


def _sizes(text: str) -> list[int]:
    sizes = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    if not sizes or min(sizes) < 1:
        raise ValueError(text)
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(
        prog="control_plane.py",  # the usage line as it read when the bench was one module
        description=(control_plane.__doc__ or "").split("\n")[0],
    )
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
