"""A stand-in for the control plane's ``POST /api/events`` until the event store exists.

It checks the bearer token, validates the batch with the shared schema (422 naming the
bad events by index, as FastAPI does), stores events in a dict by id, counts every
POST, and can go down (port closed, open connections cut) and come back up on the same
port.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from pydantic import ValidationError

from onceover.events import EVENT_LIST

TOKEN = "ingest-token"
POISON_RUN = "poison-run"


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, receiver: Receiver) -> None:
        self.receiver = receiver
        self.connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", port), _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does
    disable_nagle_algorithm = True  # headers and body go out in two writes

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
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        status, answer = receiver.receive(self.path, self.headers.get("Authorization"), body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Receiver:
    """A stand-in for the control plane's event intake (see the module docstring)."""

    def __init__(self) -> None:
        self.events: dict[str, dict[str, Any]] = {}
        self.received: Counter[str] = Counter()  # how often each id arrived (re-sends allowed)
        self.posts = 0
        self.authorizations: list[str | None] = []
        self.port = 0
        self.fail_with: list[int] = []  # statuses to answer the next posts with
        self._lock = threading.Lock()
        self._server: _Server | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

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
        for connection in list(server.connections):  # keep-alive connections too
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self.events)

    def receive(self, path: str, authorization: str | None, body: bytes) -> tuple[int, Any]:
        with self._lock:
            self.posts += 1
            self.authorizations.append(authorization)
            if self.fail_with:
                return self.fail_with.pop(0), {"detail": "try again later"}
        if path != "/api/events":
            return 404, {"detail": "Not Found"}
        if authorization != f"Bearer {TOKEN}":
            return 401, {"detail": "invalid token"}
        try:
            batch = EVENT_LIST.validate_json(body)
        except ValidationError as exc:
            errors = [{"loc": ["body", *e["loc"]], "msg": e["msg"]} for e in exc.errors()]
            return 422, {"detail": errors}
        poisoned = [
            {"loc": ["body", i, "run_id"], "msg": "run is not accepted here"}
            for i, event in enumerate(batch)
            if event.run_id == POISON_RUN
        ]
        if poisoned:
            return 422, {"detail": poisoned}
        with self._lock:
            for event in batch:
                self.received[event.id] += 1
                self.events.setdefault(event.id, event.model_dump(mode="json"))
        return 200, {"stored": len(batch)}

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        """Stored events of one ``type``."""
        with self._lock:
            return [event for event in self.events.values() if event["type"] == kind]
