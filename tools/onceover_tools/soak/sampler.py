"""What the soak reads every few seconds: BigQuery's rows and streams, the query's
processes (the driver, its JVM, the JVM's Python workers: memory, threads, connections
to BigQuery), the proxy's open AppendRows calls, the ledger's files, the spool, the
control plane's lag (its own ``onceover_ingest_lag_seconds``) and the local BigQuery's
memory and disk (none against real BigQuery)."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import httpx
from google.cloud import bigquery

from onceover_tools.procfs import (
    descendants,
    processes,
    pss_mb,
    rss_threads,
    sockets,
    tcp_connections,
)
from onceover_tools.soak.job import SoakJob
from onceover_tools.soak.target import StreamFigures, WireFaults

_LAG = re.compile(r"^onceover_ingest_lag_seconds (?P<value>\S+)$", re.MULTILINE)


@dataclass(frozen=True)
class Sample:
    seconds: float
    rows_appended: int
    """Rows the table's streams took, committed or not (the local BigQuery's account; real
    BigQuery's, as the sink reported them to the control plane)."""
    rows_committed: int
    """``COUNT(*)``: rows a query of the table sees."""
    batches_committed: int
    """Micro-batches in Spark's commit log (its highest batch id + 1)."""
    driver_rss_mb: float
    driver_threads: int
    jvm_rss_mb: float
    jvm_threads: int
    workers: int
    workers_pss_mb: float
    workers_threads: int
    grpc_connections: int
    """The query's processes' established connections to the Storage Write endpoint."""
    append_calls_open: int
    """AppendRows calls open at the proxy: the streams' connections held (against real
    BigQuery: tunnels open to the Storage Write endpoint)."""
    streams_created: int
    ledger_files: int
    ledger_bytes: int
    spool_files: int
    control_plane_lag_s: float | None
    bigquery_rss_mb: float
    bigquery_disk_mb: float
    load: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def _tree(root: int | None) -> tuple[list[int], list[int], list[int]]:
    """The driver, its JVMs and the JVMs' Python workers, by pid."""
    if root is None:
        return [], [], []
    table = processes()
    if root not in table:
        return [], [], []
    tree = [root, *descendants(root, table, set())]
    jvms = [pid for pid in tree if table[pid][1] == "java"]
    workers = [pid for jvm in jvms for pid in descendants(jvm, table, set())]
    return tree, jvms, workers


def _sum(pids: list[int]) -> tuple[float, int]:
    figures = [f for pid in pids if (f := rss_threads(pid))]
    return round(sum(r for r, _ in figures), 1), sum(t for _, t in figures)


def _files(root: Path) -> tuple[int, int]:
    count = size = 0
    for directory, _, names in os.walk(root):
        for name in names:
            try:
                size += os.stat(os.path.join(directory, name)).st_size
            except OSError:
                continue  # replaced while we looked
            count += 1
    return count, size


def batches_committed(checkpoint: Path) -> int:
    """Spark's commit log: the highest committed batch id + 1 (it keeps the last 100)."""
    try:
        ids = [int(name) for name in os.listdir(checkpoint / "commits") if name.isdigit()]
    except OSError:
        return 0
    return max(ids) + 1 if ids else 0


class Sampler:
    def __init__(
        self,
        *,
        job: SoakJob,
        proxy: WireFaults,
        client: bigquery.Client,
        streams: StreamFigures,
        table: str,
        control_plane: tuple[str, str] | None,
        spool: Path,
        bigquery_pid: int | None,
        data_dir: Path | None,
    ) -> None:
        self.job, self.proxy, self.client, self.streams = job, proxy, client, streams
        self.table, self.control_plane, self.spool = table, control_plane, spool
        self.bigquery_pid, self.data_dir = bigquery_pid, data_dir
        self.samples: list[Sample] = []

    def take(self, seconds: float) -> Sample:
        tree, jvms, workers = _tree(self.job.pid)
        driver = rss_threads(tree[0]) if tree else None
        jvm_rss, jvm_threads = _sum(jvms)
        _, workers_threads = _sum(workers)  # their memory as PSS: forked, they share pages
        rows_appended, streams_created = self.streams(self.table)
        ledger_files, ledger_bytes = _files(self.job.ledger)
        bigquery_rss = rss_threads(self.bigquery_pid) if self.bigquery_pid else None
        sample = Sample(
            seconds=round(seconds, 1),
            rows_appended=rows_appended,
            rows_committed=self._count(),
            batches_committed=batches_committed(self.job.checkpoint),
            driver_rss_mb=round(driver[0], 1) if driver else 0.0,
            driver_threads=driver[1] if driver else 0,
            jvm_rss_mb=jvm_rss,
            jvm_threads=jvm_threads,
            workers=len(workers),
            workers_pss_mb=round(sum(pss_mb(pid) for pid in workers), 1),
            workers_threads=workers_threads,
            grpc_connections=self._connections(tree),
            append_calls_open=self.proxy.open_append_calls,
            streams_created=streams_created,
            ledger_files=ledger_files,
            ledger_bytes=ledger_bytes,
            spool_files=_files(self.spool)[0],
            control_plane_lag_s=self._lag(),
            bigquery_rss_mb=round(bigquery_rss[0], 1) if bigquery_rss else 0.0,
            bigquery_disk_mb=round(_files(self.data_dir)[1] / 2**20, 1) if self.data_dir else 0.0,
            load=round(os.getloadavg()[0], 2),
        )
        self.samples.append(sample)
        return sample

    def _count(self) -> int:
        row = next(iter(self.client.query_and_wait(f"SELECT COUNT(*) AS n FROM `{self.table}`")))
        return int(row["n"])

    def _connections(self, tree: list[int]) -> int:
        held: set[int] = set()
        for pid in tree:
            held |= sockets(pid)
        established, _ = tcp_connections(self.proxy.port)
        return len(held & established)

    def _lag(self) -> float | None:
        if self.control_plane is None:
            return None
        url, token = self.control_plane
        try:
            answer = httpx.get(
                f"{url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10
            )
            answer.raise_for_status()
        except httpx.HTTPError:
            return None  # down for a moment: a gap in the series, not a failed soak
        match = _LAG.search(answer.text)
        return round(float(match["value"]), 2) if match else None
