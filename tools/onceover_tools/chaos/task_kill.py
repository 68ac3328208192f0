"""``spark/kill_task``: SIGKILL the Spark Python worker behind one proxied connection.

The fault proxy calls :func:`kill_sender` while the worker's append is in flight. The
connection is found by both of its ends, never by a port number alone: a local port
number is unique only per connection, so another process on the machine (another chaos
lane's worker, a concurrent job's JVM starting up) may hold a socket with the same
number towards somewhere else. Matching the port alone once killed such a bystander.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from pathlib import Path

KILLED = "killed Spark worker"

Address = tuple[str, int]


def kill_sender(peer: str, server: str) -> str:
    """SIGKILL the Spark Python worker whose connection to ``server`` (``host:port``, the
    proxy) comes from ``peer`` (gRPC's ``ipv4:host:port``); say what was done."""
    client = _parse(peer.split(":", 1)[1])
    pid = _pid_holding(client, _parse(server))
    if pid is None:
        return f"no process holds {client[0]}:{client[1]} -> {server} any more"
    command = _command(pid)
    if pid == os.getpid() or "pyspark" not in command:
        return f"pid {pid} ({command[:60]}) is not a Spark worker; left alone"
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return f"pid {pid} exited before it could be killed"
    return f"{KILLED} pid {pid}"


def _parse(host_port: str) -> Address:
    host, port = host_port.rsplit(":", 1)
    return host.strip("[]"), int(port)


def _pid_holding(local: Address, remote: Address) -> int | None:
    """The process holding the TCP socket ``local`` -> ``remote``, found through the
    socket's inode (``/proc/net/tcp*``) and the process's descriptors (``/proc/<pid>/fd``)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if _address(fields[1]) == local and _address(fields[2]) == remote:
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(proc.name)
    return None


def _address(field: str) -> Address:
    """``0100007F:1F90`` (or its 32-digit IPv6 form) as ``("127.0.0.1", 8080)``: the
    kernel writes each 32-bit word of the address in host (little-endian) order."""
    hex_ip, hex_port = field.split(":")
    raw = b"".join(bytes.fromhex(hex_ip[i : i + 8])[::-1] for i in range(0, len(hex_ip), 8))
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw), int(hex_port, 16)
    ip = socket.inet_ntop(socket.AF_INET6, raw)
    return ip.removeprefix("::ffff:"), int(hex_port, 16)  # an IPv4-mapped address


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "?"
