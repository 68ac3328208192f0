"""A real HTTP receiver of webhooks for tests: it records every request (headers, body,
arrival time), verifies each signature with the Standard Webhooks reference library
(``standardwebhooks``, an implementation independent of ours), answers what it is told
to (a status, a ``Retry-After``), and can go down and come back on the same port."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: str
    at: float  # time.monotonic()
    verified: bool
    answered: int

    @property
    def message_id(self) -> str:
        return self.headers["webhook-id"]

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, receiver: WebhookReceiver) -> None:
        self.receiver = receiver
        self.connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        cast(_Server, self.server).connections.add(self.connection)

    def finish(self) -> None:
        cast(_Server, self.server).connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        receiver = cast(_Server, self.server).receiver
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        answer = receiver.take({k.lower(): v for k, v in self.headers.items()}, body)
        self.send_response(answer.status)
        if answer.retry_after is not None:
            self.send_header("Retry-After", answer.retry_after)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class WebhookReceiver:
    """See the module docstring. ``secret`` must be set to verify signatures."""

    def __init__(self) -> None:
        self.secret: str | None = None
        self.answers: list[Answer] = []  # answered in order, then 200
        self.received: list[Received] = []
        self.port = 0
        self._lock = threading.Lock()
        self._server: _Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def up(self) -> None:
        self._server = _Server(self.port, self)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def down(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        for connection in list(server.connections):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def take(self, headers: dict[str, str], body: str) -> Answer:
        verified = False
        if self.secret is not None:
            try:
                Webhook(self.secret).verify(body, headers)
                verified = True
            except WebhookVerificationError:
                verified = False
        with self._lock:
            answer = self.answers.pop(0) if self.answers else Answer(200)
            self.received.append(Received(headers, body, time.monotonic(), verified, answer.status))
        return answer

    def all(self) -> list[Received]:
        with self._lock:
            return list(self.received)

    def wait_for(self, count: int, timeout_s: float = 30.0) -> list[Received]:
        """The requests received, once there are at least ``count`` (or the deadline)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = self.all()
            if len(got) >= count:
                return got
            time.sleep(0.05)  # requests arrive on the dispatcher's schedule; look again
        raise AssertionError(f"{count} webhook requests expected, {len(self.all())} arrived")
