"""An HTTP CONNECT proxy that breaks the Storage Write API's connections on cue: the
soak's wire faults against real BigQuery, where the traffic is TLS end to end.

In front of the local BigQuery the soak's faults are the gRPC fault proxy's
(:mod:`onceover_tools.chaos.proxy`), which reads each call. Towards Google it cannot:
the sink's channels are TLS with Google's certificates. So the job is given this proxy
as its ``proxyAddress`` (both clients then open their connections as ``CONNECT
host:port`` tunnels through it, as through any corporate proxy) and the faults act on
the tunnel to the Storage Write endpoint, on bytes it never decrypts:

- ``kill``: the next append's bytes (a write from the client of at least
  :data:`APPEND_MIN_BYTES`: only an ``AppendRows`` message carrying rows is that large;
  stream creation, commits and pings are a few hundred bytes) are forwarded, then the
  process that sent them (a Spark Python worker) is handed to ``on_kill`` while its
  append is in flight;
- ``drop_response``: the next append's bytes are forwarded, whatever the server sends
  back for :data:`DROP_AFTER_S` is thrown away, then the tunnel is closed both ways.
  BigQuery has applied the append (it answers one in well under a second); the client
  never hears so and cannot know.

A ``proxyAddress`` the user gave (a corporate proxy) is kept: each tunnel is opened
through it (``CONNECT`` to it, with its credentials), so the faults sit between the
job and the user's own proxy. Anything but ``CONNECT`` is answered 405: real BigQuery's
endpoints are HTTPS, so nothing else should come.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import selectors
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self
from urllib.parse import urlsplit

from onceover.processes import StartStop
from onceover_tools.chaos.proxy import APPEND_ROWS, FiredWireFault, WireAction, WireFault

logger = logging.getLogger(__name__)

APPEND_MIN_BYTES = 4096
"""A client write at least this large on the Storage Write tunnel is taken for an append
with rows (TLS records carry at most 16 KB, so a large append is several such writes;
the first counts)."""
DROP_AFTER_S = 2.0
"""How long ``drop_response`` waits, discarding the server's answers, before it closes
the tunnel: long enough for BigQuery to have applied the append."""
TUNNEL_ACTIONS = ("kill", "drop_response")
HEAD_MAX_BYTES = 16_384
CONNECT_TIMEOUT_S = 30.0
_READ = 65_536


@dataclass(frozen=True)
class Upstream:
    """The user's own proxy, which each tunnel goes through."""

    address: str
    """``http://host:port``."""
    username: str | None = None
    password: str | None = None

    def authorization(self) -> str | None:
        if self.username is None:
            return None
        token = base64.b64encode(f"{self.username}:{self.password or ''}".encode()).decode()
        return f"Basic {token}"


class TunnelError(OSError):
    """A tunnel could not be opened (the target or the user's proxy refused it)."""


class TunnelFaultProxy(StartStop):
    """CONNECT tunnels to anywhere; faults on the ones to ``storage_endpoint``."""

    def __init__(
        self,
        storage_endpoint: str,
        *,
        upstream: Upstream | None = None,
        on_kill: Callable[[str, str], str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.storage_endpoint = storage_endpoint
        """``host:port`` as the client names it in ``CONNECT``."""
        self.upstream, self.on_kill, self.host = upstream, on_kill, host
        self.port = 0
        self.plan: list[WireFault] = []
        self.fired: list[FiredWireFault] = []
        self.tunnels = 0
        """Tunnels opened so far, to anywhere."""
        self.open_append_calls = 0
        """Tunnels to the Storage Write endpoint open now (each a client's connection;
        the local proxy counts AppendRows calls, which this one cannot see)."""
        self._appends = 0
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """As the sink's ``proxyAddress`` takes it."""
        return f"http://{self.endpoint}"

    def start(self) -> Self:
        listener = socket.create_server((self.host, 0))
        listener.settimeout(0.5)
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept, name="tunnel-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for thread in self._threads:
            thread.join(timeout=5)

    # -- the plan -----------------------------------------------------------------

    def arm_next(self, action: WireAction, method: str = APPEND_ROWS) -> WireFault:
        """Do ``action`` (``kill`` or ``drop_response``) to the next append on the tunnel
        to the Storage Write endpoint."""
        if action not in TUNNEL_ACTIONS or method != APPEND_ROWS:
            raise ValueError(
                f"a tunnel sees no calls: only {' and '.join(TUNNEL_ACTIONS)} of "
                f"{APPEND_ROWS}, not {action} of {method}"
            )
        with self._lock:
            fault = WireFault(action, APPEND_ROWS, self._appends + 1)
            self.plan.append(fault)
        return fault

    def _take(self) -> WireFault | None:
        """Count one append; the fault planned for it, taken out of the plan."""
        with self._lock:
            self._appends += 1
            for fault in self.plan:
                if fault.nth <= self._appends:
                    self.plan.remove(fault)
                    return fault
        return None

    def _fire(self, fault: WireFault, detail: str) -> None:
        with self._lock:
            self.fired.append(FiredWireFault(fault, time.monotonic(), detail))
        logger.debug("fired: %s on append %d: %s", fault.action, fault.nth, detail)

    # -- the tunnels --------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stopping.is_set():
            listener = self._listener
            if listener is None:
                return
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by stop()
            thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
            thread.start()

    def _serve(self, client: socket.socket) -> None:
        with contextlib.closing(client):
            try:
                head = _read_head(client)
                target = _connect_target(head)
                if target is None:
                    client.sendall(_answer(405, "only CONNECT tunnels are served here"))
                    return
                try:
                    server = self._open(target)
                except OSError as exc:
                    client.sendall(_answer(502, f"could not reach {target}: {exc}"))
                    return
                with contextlib.closing(server):
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    with self._lock:
                        self.tunnels += 1
                    self._relay(client, server, target == self.storage_endpoint)
            except OSError as exc:
                logger.debug("tunnel ended: %s", exc)

    def _open(self, target: str) -> socket.socket:
        if self.upstream is None:
            host, port = target.rsplit(":", 1)
            return socket.create_connection((host.strip("[]"), int(port)), CONNECT_TIMEOUT_S)
        parts = urlsplit(self.upstream.address)
        assert parts.hostname is not None
        assert parts.port is not None
        server = socket.create_connection((parts.hostname, parts.port), CONNECT_TIMEOUT_S)
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if (authorization := self.upstream.authorization()) is not None:
            lines.append(f"Proxy-Authorization: {authorization}")
        server.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status = _read_head(server).split(b"\r\n", 1)[0].decode("latin-1")
        if status.split(" ")[1:2] != ["200"]:
            server.close()
            raise TunnelError(f"the proxy {self.upstream.address} answered {status!r}")
        return server

    def _relay(self, client: socket.socket, server: socket.socket, storage: bool) -> None:
        if storage:
            with self._lock:
                self.open_append_calls += 1
        try:
            self._pump(client, server, storage)
        finally:
            if storage:
                with self._lock:
                    self.open_append_calls -= 1

    def _pump(self, client: socket.socket, server: socket.socket, storage: bool) -> None:
        peer = "ipv4:{}:{}".format(*client.getpeername()[:2])
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, server)
        selector.register(server, selectors.EVENT_READ, client)
        dropping: tuple[WireFault, float] | None = None
        try:
            while not self._stopping.is_set():
                if dropping is not None and time.monotonic() >= dropping[1]:
                    self._fire(dropping[0], f"tunnel closed {DROP_AFTER_S:.0f} s after an "
                                            "append, its answer thrown away")  # fmt: skip
                    return
                for key, _ in selector.select(timeout=0.2):
                    source, sink = key.fileobj, key.data
                    assert isinstance(source, socket.socket)
                    data = source.recv(_READ)
                    if not data:
                        return
                    if source is server and dropping is not None:
                        continue  # the answer the client must never get
                    sink.sendall(data)
                    if source is client and storage and len(data) >= APPEND_MIN_BYTES:
                        dropping = self._on_append(peer) or dropping
        finally:
            selector.close()

    def _on_append(self, peer: str) -> tuple[WireFault, float] | None:
        fault = self._take()
        if fault is None:
            return None
        if fault.action == "drop_response":
            return fault, time.monotonic() + DROP_AFTER_S
        detail = self.on_kill(peer, self.endpoint) if self.on_kill else "no one to kill"
        self._fire(fault, detail)
        return None


def _read_head(sock: socket.socket) -> bytes:
    """An HTTP message's head, byte by byte (nothing of the tunnel after it is read)."""
    head = bytearray()
    while not head.endswith(b"\r\n\r\n"):
        byte = sock.recv(1)
        if not byte:
            raise TunnelError("the connection closed before its request head ended")
        head += byte
        if len(head) > HEAD_MAX_BYTES:
            raise TunnelError("a request head over 16 KB")
    return bytes(head)


def _connect_target(head: bytes) -> str | None:
    """``host:port`` of a ``CONNECT`` request; ``None`` for any other method."""
    words = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    if len(words) != 3 or words[0] != "CONNECT" or ":" not in words[1]:
        return None
    return words[1]


def _answer(code: int, text: str) -> bytes:
    reason = {405: "Method Not Allowed", 502: "Bad Gateway"}[code]
    body = text.encode()
    return (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
