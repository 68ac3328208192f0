"""The soak's process tree, read from /proc: the driver, the Spark JVM, its Python workers,
their memory, threads and connections to the local BigQuery's gRPC port."""

from __future__ import annotations

import os
from dataclasses import dataclass

from onceover_tools.bench.stream_economy.figures import Sample
from onceover_tools.procfs import (
    descendants,
    processes,
    pss_mb,
    rss_threads,
    sockets,
    tcp_connections,
)


@dataclass(frozen=True)
class ProcessTree:
    """This driver, the Spark JVM it started and the JVM's Python workers; not the local
    BigQuery, which is a child of this process too."""

    bigquery_pid: int | None
    grpc_port: int

    def members(self) -> tuple[list[int], list[int], list[int]]:
        """The pids of the whole tree (this process first), of the JVM, of its workers."""
        table = processes()
        me = os.getpid()
        tree = descendants(me, table, {self.bigquery_pid} if self.bigquery_pid else set())
        jvms = [pid for pid in tree if table[pid][1] == "java"]
        workers = [
            pid for jvm in jvms for pid in descendants(jvm, table, set())
        ]  # the daemon and the workers it forked: Spark's executors' Python
        return [me, *tree], jvms, workers

    def connections(self, pids: list[int] | None = None) -> tuple[int, int]:
        """The tree's open connections to the gRPC port, and those closed within a minute."""
        held: set[int] = set()
        for pid in self.members()[0] if pids is None else pids:
            held |= sockets(pid)
        established, waiting = tcp_connections(self.grpc_port)
        return len(held & established), waiting

    def sample(self, seconds: float, streams: int, batches: int, peak: int = 0) -> Sample:
        pids, jvms, workers = self.members()
        driver = rss_threads(pids[0]) or (0.0, 0)
        jvm = [figures for pid in jvms if (figures := rss_threads(pid))]
        worker = [figures for pid in workers if (figures := rss_threads(pid))]
        held, closed = self.connections(pids)
        return Sample(
            seconds=round(seconds, 1),
            driver_rss_mb=round(driver[0], 1),
            driver_threads=driver[1],
            jvm_rss_mb=round(sum(r for r, _ in jvm), 1) if jvm else None,
            jvm_threads=sum(t for _, t in jvm) if jvm else None,
            workers=len(worker),
            workers_rss_mb=round(sum(r for r, _ in worker), 1),
            workers_pss_mb=round(sum(pss_mb(pid) for pid in workers), 1),
            workers_threads=sum(t for _, t in worker),
            grpc_connections=held,
            grpc_connections_peak=max(peak, held),
            grpc_closed_last_minute=closed,
            streams=streams,
            batches=batches,
            load=round(os.getloadavg()[0], 2),
        )
