"""A real HTTP receiver of webhooks for tests: it records every request (headers, body,
arrival time), verifies each signature with the Standard Webhooks reference library
(``standardwebhooks``, an implementation independent of ours), answers what it is told
to (a status, a ``Retry-After``), and can go down and come back on the same port."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.helpers.local_http import LocalServer, TrackedHandler
from tests.helpers.waiting import wait_until


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


class _Handler(TrackedHandler):
    def do_POST(self) -> None:  # noqa: N802 (the name http.server calls)
        receiver: WebhookReceiver = self.owner
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        answer = receiver.take({k.lower(): v for k, v in self.headers.items()}, body)
        self.send_response(answer.status)
        if answer.retry_after is not None:
            self.send_header("Retry-After", answer.retry_after)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


class WebhookReceiver(LocalServer):
    """See the module docstring. ``secret`` must be set to verify signatures."""

    handler = _Handler

    def __init__(self) -> None:
        super().__init__()
        self.secret: str | None = None
        self.answers: list[Answer] = []  # answered in order, then 200
        self.received: list[Received] = []
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

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
        """The requests received, once there are at least ``count`` (they arrive on the
        dispatcher's schedule)."""
        return wait_until(
            f"{count} webhook requests arriving",
            lambda: got if len(got := self.all()) >= count else None,
            timeout_s,
            seen=lambda: f"{len(self.all())} arrived",
        )
