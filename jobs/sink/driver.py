"""Which Spark driver this process works for: the sink's driver side runs in Python
workers the driver's JVM starts, so the JVM is the driver."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def java_ancestor() -> int | None:
    """The pid of the nearest ancestor JVM (Spark's driver), if there is one."""
    pid = os.getppid()
    while pid > 1:
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if comm == "java":
            return pid
        # The parent pid is the 2nd field after the parenthesised command name.
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def driver_owner() -> str:
    """Names the driver for the ledger's intents: host, JVM pid and the JVM's start time
    (so a pid the system gives again is another owner). Outside Spark, this process."""
    pid = java_ancestor() or os.getpid()
    try:
        # /proc/<pid>/stat field 22: start time in clock ticks since boot
        started = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "?"
    return f"{socket.gethostname()} pid {pid} started {started}"
