"""The soak's process tree, read from /proc: the driver, the Spark JVM, its Python workers,
their memory, threads and connections to the local BigQuery's gRPC port."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from onceover_tools.bench.stream_economy.figures import Sample


def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, command name)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            text = Path(entry.path, "stat").read_text()
        except OSError:
            continue  # it ended while we looked
        name = text[text.index("(") + 1 : text.rindex(")")]
        table[int(entry.name)] = (int(text[text.rindex(")") + 2 :].split()[1]), name)
    return table


def _descendants(root: int, table: dict[int, tuple[int, str]], skip: set[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in skip:
                found.append(child)
                todo.append(child)
    return found


def _rss_threads(pid: int) -> tuple[float, int] | None:
    """RSS (MB) and threads of ``pid``; ``None`` once it has ended."""
    rss_kb = threads = None
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("VmRSS:"):
            rss_kb = int(line.split()[1])
        elif line.startswith("Threads:"):
            threads = int(line.split()[1])
    return (rss_kb / 1024, threads) if rss_kb is not None and threads is not None else None


def _pss_mb(pid: int) -> float:
    """Proportional set size: each shared page divided among the processes that map it
    (forked workers share most of theirs, which their RSS counts in each)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in lines if line.startswith("Pss:")), 0.0)


ESTABLISHED, TIME_WAIT = "01", "06"


def _tcp(port: int) -> tuple[set[int], int]:
    """Socket inodes of established TCP connections whose remote end is ``port``, and
    how many connections on ``port`` (either end) are in TIME_WAIT."""
    inodes: set[int] = set()
    waiting = 0
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            local, remote = (int(parts[i].rsplit(":", 1)[1], 16) for i in (1, 2))
            if parts[3] == ESTABLISHED and remote == port:
                inodes.add(int(parts[9]))
            elif parts[3] == TIME_WAIT and port in (local, remote):
                waiting += 1
    return inodes, waiting


def _sockets(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(int(link[8:-1]))
    return inodes


@dataclass(frozen=True)
class ProcessTree:
    """This driver, the Spark JVM it started and the JVM's Python workers; not the local
    BigQuery, which is a child of this process too."""

    bigquery_pid: int | None
    grpc_port: int

    def members(self) -> tuple[list[int], list[int], list[int]]:
        """The pids of the whole tree (this process first), of the JVM, of its workers."""
        table = _processes()
        me = os.getpid()
        tree = _descendants(me, table, {self.bigquery_pid} if self.bigquery_pid else set())
        jvms = [pid for pid in tree if table[pid][1] == "java"]
        workers = [
            pid for jvm in jvms for pid in _descendants(jvm, table, set())
        ]  # the daemon and the workers it forked: Spark's executors' Python
        return [me, *tree], jvms, workers

    def connections(self, pids: list[int] | None = None) -> tuple[int, int]:
        """The tree's open connections to the gRPC port, and those closed within a minute."""
        held: set[int] = set()
        for pid in self.members()[0] if pids is None else pids:
            held |= _sockets(pid)
        established, waiting = _tcp(self.grpc_port)
        return len(held & established), waiting

    def sample(self, seconds: float, streams: int, batches: int, peak: int = 0) -> Sample:
        pids, jvms, workers = self.members()
        driver = _rss_threads(pids[0]) or (0.0, 0)
        jvm = [figures for pid in jvms if (figures := _rss_threads(pid))]
        worker = [figures for pid in workers if (figures := _rss_threads(pid))]
        held, closed = self.connections(pids)
        return Sample(
            seconds=round(seconds, 1),
            driver_rss_mb=round(driver[0], 1),
            driver_threads=driver[1],
            jvm_rss_mb=round(sum(r for r, _ in jvm), 1) if jvm else None,
            jvm_threads=sum(t for _, t in jvm) if jvm else None,
            workers=len(worker),
            workers_rss_mb=round(sum(r for r, _ in worker), 1),
            workers_pss_mb=round(sum(_pss_mb(pid) for pid in workers), 1),
            workers_threads=sum(t for _, t in worker),
            grpc_connections=held,
            grpc_connections_peak=max(peak, held),
            grpc_closed_last_minute=closed,
            streams=streams,
            batches=batches,
            load=round(os.getloadavg()[0], 2),
        )
