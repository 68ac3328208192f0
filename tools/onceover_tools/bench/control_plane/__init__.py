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

The parts, a module each: :mod:`~.databases` (a fresh database and what it holds),
:mod:`~.server` (the backend in a child process), :mod:`~.ingest` (the fill and the posts),
:mod:`~.reads` (the dashboard's reads, timed), :mod:`~.measure` (every phase on one
database), :mod:`~.figures` and :mod:`~.report`; ``__main__`` is the command line. The
events come from :mod:`onceover_tools.bench.control_plane_workload`.
"""

from __future__ import annotations

from onceover_tools.bench.control_plane.databases import DATABASES, POSTGRES_ADMIN
from onceover_tools.bench.control_plane.figures import Figures, percentile
from onceover_tools.bench.control_plane.measure import bench_database
from onceover_tools.bench.control_plane.report import NOT_REACHED, growth, slowest_read_p95
from onceover_tools.bench.control_plane_workload import TABLES, Workload, build_workload

__all__ = [
    "DATABASES",
    "NOT_REACHED",
    "POSTGRES_ADMIN",
    "TABLES",
    "Figures",
    "Workload",
    "bench_database",
    "build_workload",
    "growth",
    "percentile",
    "slowest_read_p95",
]
