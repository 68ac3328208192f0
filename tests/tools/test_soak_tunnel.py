"""The soak's CONNECT proxy (``onceover_tools.soak.tunnel``) on real sockets: it tunnels,
it breaks the Storage Write tunnel on cue (a killed sender, an answer thrown away and the
tunnel closed), it leaves other tunnels alone, and it goes through the user's own proxy
with the user's credentials."""

from __future__ import annotations

import base64
import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
from onceover_tools.soak.tunnel import (
    APPEND_MIN_BYTES,
    DROP_AFTER_S,
    TunnelFaultProxy,
    Upstream,
)

from tests.helpers.waiting import wait_until

APPEND = b"a" * (APPEND_MIN_BYTES * 2)


class _Server:
    """A listening socket on a free port, each connection served on a thread of its own."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.listener.accept()
                threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()


class EchoServer(_Server):
    """Answers every read with the same bytes: the far end of a tunnel."""

    def __init__(self) -> None:
        self.received = 0
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            while data := conn.recv(65_536):
                self.received += len(data)
                conn.sendall(data)


class RecordingProxy(_Server):
    """A user's corporate proxy: records each CONNECT head, answers ``status``, then
    relays to the echo server whatever the target."""

    def __init__(self, echo: EchoServer, status: str = "200 Connection established") -> None:
        self.echo, self.status = echo, status
        self.heads: list[str] = []
        super().__init__()
        self.address = f"http://{self.endpoint}"

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                head += conn.recv(1)
            self.heads.append(head.decode())
            conn.sendall(f"HTTP/1.1 {self.status}\r\n\r\n".encode())
            if not self.status.startswith("200"):
                return
            host, port = self.echo.endpoint.split(":")
            with socket.create_connection((host, int(port))) as far:
                far.settimeout(5)
                conn.settimeout(5)
                while data := conn.recv(65_536):
                    far.sendall(data)
                    conn.sendall(_read_exactly(far, len(data)))


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _tunnel(proxy: TunnelFaultProxy, target: str) -> tuple[socket.socket, str]:
    """A client's tunnel through ``proxy`` to ``target``, and the proxy's status line."""
    client = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
    client.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        byte = client.recv(1)
        if not byte:
            break
        head += byte
    return client, head.split(b"\r\n", 1)[0].decode()


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    yield server
    server.close()


def test_a_tunnel_carries_bytes_both_ways_and_other_methods_are_refused(
    echo: EchoServer,
) -> None:
    with TunnelFaultProxy(echo.endpoint) as proxy:
        client, status = _tunnel(proxy, echo.endpoint)
        with client:
            assert status == "HTTP/1.1 200 Connection established"
            client.sendall(APPEND)
            assert _read_exactly(client, len(APPEND)) == APPEND
            assert proxy.open_append_calls == 1
        wait_until("the tunnel to close", lambda: proxy.open_append_calls == 0 or None, 10)

        plain = socket.create_connection(("127.0.0.1", proxy.port), timeout=10)
        with plain:
            plain.sendall(b"GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n")
            answer = plain.recv(4096).decode()
        assert answer.startswith("HTTP/1.1 405")
        assert "only CONNECT" in answer
        assert proxy.tunnels == 1


def test_drop_response_forwards_the_append_throws_its_answer_away_and_closes(
    echo: EchoServer,
) -> None:
    with TunnelFaultProxy(echo.endpoint) as proxy:
        client, _ = _tunnel(proxy, echo.endpoint)
        with client:
            client.sendall(b"small")  # a stream's creation, a ping: not an append
            assert _read_exactly(client, 5) == b"small"
            fault = proxy.arm_next("drop_response")
            sent = time.monotonic()
            client.sendall(APPEND)
            # The server got the append; the client gets nothing back, then the end.
            assert client.recv(65_536) == b""
            assert time.monotonic() - sent >= DROP_AFTER_S * 0.9
        assert echo.received == 5 + len(APPEND)
        assert [f.fault for f in proxy.fired] == [fault]
        assert "answer thrown away" in proxy.fired[0].detail
        assert proxy.plan == []


def test_kill_hands_over_the_connection_of_the_sender_of_the_next_append(
    echo: EchoServer,
) -> None:
    calls: list[tuple[str, str]] = []

    def on_kill(peer: str, server: str) -> str:
        calls.append((peer, server))
        return "killed"

    with TunnelFaultProxy(echo.endpoint, on_kill=on_kill) as proxy:
        client, _ = _tunnel(proxy, echo.endpoint)
        with client:
            proxy.arm_next("kill")
            client.sendall(APPEND)
            assert _read_exactly(client, len(APPEND)) == APPEND  # forwarded, answered
            wait_until("the fault to fire", lambda: proxy.fired or None, 10)
            host, port = client.getsockname()[:2]
        assert calls == [(f"ipv4:{host}:{port}", proxy.endpoint)]
        assert proxy.fired[0].detail == "killed"


def test_tunnels_to_other_hosts_are_left_alone(echo: EchoServer) -> None:
    """The REST endpoint's tunnel carries large requests too; only the Storage Write
    endpoint's appends are faulted."""
    with TunnelFaultProxy("bigquerystorage.googleapis.com:443") as proxy:
        proxy.arm_next("drop_response")
        client, _ = _tunnel(proxy, echo.endpoint)
        with client:
            client.sendall(APPEND)
            assert _read_exactly(client, len(APPEND)) == APPEND
            assert proxy.open_append_calls == 0
        assert proxy.fired == []
        assert len(proxy.plan) == 1


def test_a_fault_a_tunnel_cannot_do_is_refused(echo: EchoServer) -> None:
    with TunnelFaultProxy(echo.endpoint) as proxy:
        with pytest.raises(ValueError, match="a tunnel sees no calls"):
            proxy.arm_next("gap")
        with pytest.raises(ValueError, match="a tunnel sees no calls"):
            proxy.arm_next("unavailable", "BatchCommitWriteStreams")


def test_the_users_proxy_is_kept_behind_the_tunnel_with_its_credentials(
    echo: EchoServer,
) -> None:
    corporate = RecordingProxy(echo)
    upstream = Upstream(corporate.address, "loader", "s3cret")
    try:
        with TunnelFaultProxy("bigquerystorage.googleapis.com:443", upstream=upstream) as proxy:
            client, status = _tunnel(proxy, "bigquerystorage.googleapis.com:443")
            with client:
                assert status.endswith("200 Connection established")
                client.sendall(b"hello")
                assert _read_exactly(client, 5) == b"hello"
    finally:
        corporate.close()
    (head,) = corporate.heads
    assert head.startswith("CONNECT bigquerystorage.googleapis.com:443 HTTP/1.1\r\n")
    assert f"Proxy-Authorization: Basic {base64.b64encode(b'loader:s3cret').decode()}" in head


def test_a_refusal_by_the_users_proxy_is_passed_on_naming_it(echo: EchoServer) -> None:
    corporate = RecordingProxy(echo, status="407 Proxy Authentication Required")
    try:
        with TunnelFaultProxy(echo.endpoint, upstream=Upstream(corporate.address)) as proxy:
            client, status = _tunnel(proxy, echo.endpoint)
            with client:
                body = client.recv(4096).decode()
    finally:
        corporate.close()
    assert status == "HTTP/1.1 502 Bad Gateway"
    assert corporate.address in body
    assert "407 Proxy Authentication Required" in body
