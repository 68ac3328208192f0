"""``spark/kill_task`` finds the process behind a connection, by both its ends, and kills
only a Spark worker."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from onceover_tools.chaos.task_kill import kill_sender

HOLD_A_CONNECTION = (
    "import socket, sys, time\n"
    "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])))\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(120)\n"
)


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.create_server(("127.0.0.1", 0))
    yield server
    server.close()


def _client(listener: socket.socket, name: str) -> tuple[subprocess.Popen[str], str]:
    """A process connected to ``listener``, with ``name`` in its command line; its peer."""
    port = listener.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_CONNECTION, str(port), name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    local_port = child.stdout.readline().strip()
    return child, f"ipv4:127.0.0.1:{local_port}"


def _server(listener: socket.socket) -> str:
    host, port = listener.getsockname()
    return f"{host}:{port}"


def _end(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.wait()
    assert child.stdout is not None
    child.stdout.close()


def test_the_worker_holding_the_connection_is_killed(listener: socket.socket) -> None:
    child, peer = _client(listener, "pyspark.daemon-standin")
    try:
        detail = kill_sender(peer, _server(listener))
        assert detail == f"killed Spark worker pid {child.pid}"
        assert child.wait(10) == -signal.SIGKILL
    finally:
        _end(child)


def test_a_process_that_is_not_a_spark_worker_is_left_alone(listener: socket.socket) -> None:
    child, peer = _client(listener, "some-other-client")
    try:
        detail = kill_sender(peer, _server(listener))
        assert detail.startswith(f"pid {child.pid} (")
        assert detail.endswith("is not a Spark worker; left alone")
        assert child.poll() is None
    finally:
        _end(child)


def test_a_connection_nobody_holds_any_more_is_said_so() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    done = kill_sender(f"ipv4:127.0.0.1:{free}", "127.0.0.1:9")
    assert done == f"no process holds 127.0.0.1:{free} -> 127.0.0.1:9 any more"


HOLD_FROM_PORT = (
    "import socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[2])))\n"
    "s.connect(('127.0.0.1', int(sys.argv[1])))\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(120)\n"
)
HOLD_A_LISTENER = (
    "import socket, sys, time\n"
    "s = socket.create_server(('127.0.0.2', 0))\n"
    "print(s.getsockname()[1], flush=True)\n"
    "time.sleep(120)\n"
)


def test_only_the_process_on_the_proxys_connection_is_killed(listener: socket.socket) -> None:
    # Another Spark process (a concurrent job's JVM, a worker of another chaos lane) may
    # hold a socket with the same local port on another connection: it must be spared.
    # The decoy starts first, so it comes first in /proc.
    decoy = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_LISTENER, "pyspark-decoy"], stdout=subprocess.PIPE, text=True
    )
    assert decoy.stdout is not None
    port = decoy.stdout.readline().strip()
    server_port = listener.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_FROM_PORT, str(server_port), port, "pyspark.daemon-standin"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == port
        detail = kill_sender(f"ipv4:127.0.0.1:{port}", f"127.0.0.1:{server_port}")
        assert detail == f"killed Spark worker pid {child.pid}"
        assert child.wait(10) == -signal.SIGKILL
        assert decoy.poll() is None
    finally:
        _end(child)
        _end(decoy)
