"""The demo's webhook receiver: a small HTTP server that answers 200 and keeps what came.

It stands where a team's pager or chat hook would, so the demo can show alert
deliveries arriving and their Standard Webhooks signatures checking out, without
anything outside this machine.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, cast

from onceover_backend.services.webhooks.signing import signature

from onceover.processes import StartStop

MAX_BODY_BYTES = 1_000_000
"""A delivery is a few kilobytes; anything much larger is not one and is refused."""


@dataclass(frozen=True)
class Delivery:
    """One request as it arrived: its headers (names lower-cased) and body."""

    headers: dict[str, str]
    body: str

    def signed_with(self, secret: str) -> bool:
        """Whether ``webhook-signature`` is the endpoint's HMAC of id, timestamp and body."""
        message_id = self.headers.get("webhook-id", "")
        timestamp = self.headers.get("webhook-timestamp", "")
        if not timestamp.isdigit():
            return False
        expected = signature(secret, message_id, int(timestamp), self.body)
        # The header may carry several space-separated signatures (key rotation).
        given = self.headers.get("webhook-signature", "").split()
        return any(hmac.compare_digest(expected, one) for one in given)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, receiver: WebhookReceiver) -> None:
        self.receiver = receiver
        super().__init__((receiver.host, 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the backend's client expects

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY_BYTES:
            self._answer(413, b"too large")
            return
        body = self.rfile.read(length).decode("utf-8", errors="replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        cast(_Server, self.server).receiver.keep(Delivery(headers, body))
        self._answer(200, b"ok")

    def _answer(self, status: int, text: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        self.wfile.write(text)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the demo's console shows steps, not requests


class WebhookReceiver(StartStop):
    """Serves on ``host`` (a free port) until stopped; :attr:`received` in arrival order."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = 0
        self._server: _Server | None = None
        self._lock = threading.Lock()
        self._received: list[Delivery] = []

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/hooks/onceover"

    @property
    def received(self) -> list[Delivery]:
        with self._lock:
            return list(self._received)

    def keep(self, delivery: Delivery) -> None:
        with self._lock:
            self._received.append(delivery)

    def start(self) -> Self:
        self._server = _Server(self)
        self.port = self._server.server_address[1]
        threading.Thread(
            target=self._server.serve_forever, args=(0.1,), name="demo-webhooks", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
