"""Which Spark driver this process works for: the sink's driver side runs in Python
workers the driver's JVM starts, so the JVM is the driver."""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path


def java_ancestor() -> int | None:
    """The pid of the nearest ancestor JVM (Spark's driver), if there is one."""
    pid: int | None = os.getppid()
    while pid is not None and pid > 1:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            return None
        if comm == "java":
            return pid
        pid = parent_of(pid)
    return None


def parent_of(pid: int) -> int | None:
    """The parent of process ``pid``; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The parent pid is the 2nd field after the parenthesised command name.
    return int(stat.rsplit(")", 1)[1].split()[1])


def driver_pid() -> int:
    """The driver's JVM; outside Spark, this process."""
    return java_ancestor() or os.getpid()


def driver_owner() -> str:
    """Names the driver for the ledger's intents: host, JVM pid and the JVM's start time
    (so a pid the system gives again is another owner). Outside Spark, this process."""
    return owner_of(driver_pid())


def owner_of(pid: int) -> str:
    """How the ledger names process ``pid`` of this host (see :func:`alive_here`)."""
    return f"{socket.gethostname()} pid {pid} started {_start_time(pid) or '?'}"


def started_at(pid: int) -> datetime | None:
    """When process ``pid`` started (boot time plus its start ticks); None if unknown."""
    ticks = _start_time(pid)
    try:
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    if ticks is None or not ticks.isdigit():
        return None
    return datetime.fromtimestamp(boot + int(ticks) / os.sysconf("SC_CLK_TCK"), UTC)


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def on_this_host(owner: str) -> bool:
    """Whether ``owner`` (a :func:`driver_owner`) names a process of this host."""
    return owner.partition(" pid ")[0] == socket.gethostname()


def alive_here(owner: str) -> bool:
    """Whether ``owner`` (a :func:`driver_owner`) is a process still running on this host;
    False when it is not, or is on another host (which cannot be told from here)."""
    host, _, rest = owner.partition(" pid ")
    pid_text, _, started = rest.partition(" started ")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    return _start_time(int(pid_text)) == started
