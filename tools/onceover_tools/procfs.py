"""What /proc says of processes: the tree below one, each one's memory, threads and
sockets, and the machine's TCP connections to a port (Linux only; the benches' and the
soak's samplers read it, never the product)."""

from __future__ import annotations

import os
from pathlib import Path


def processes() -> dict[int, tuple[int, str]]:
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


def descendants(root: int, table: dict[int, tuple[int, str]], skip: set[int]) -> list[int]:
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


def rss_threads(pid: int) -> tuple[float, int] | None:
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


def pss_mb(pid: int) -> float:
    """Proportional set size: each shared page divided among the processes that map it
    (forked workers share most of theirs, which their RSS counts in each)."""
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 1024 for line in lines if line.startswith("Pss:")), 0.0)


ESTABLISHED, TIME_WAIT = "01", "06"


def tcp_connections(port: int) -> tuple[set[int], int]:
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


def sockets(pid: int) -> set[int]:
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
