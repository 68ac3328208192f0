"""A control plane that answers, but slowly: every request gets 200 and a JSON body after
``delay_s`` (1 s by default), each on a thread of its own, so requests wait side by side
rather than in a queue. It stores nothing; it counts what it received and the tables its
events name, which is how the writers bench checks that a write's events reached it.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from onceover_tools.bench.hanging import Closing

DELAY_S = 1.0


class SlowBackend(Closing):
    """Listens on 127.0.0.1 on a free port from construction until :meth:`close`."""

    def __init__(self, delay_s: float = DELAY_S) -> None:
        self.delay_s = delay_s
        self._lock = threading.Lock()
        self._requests = 0
        self._events = 0
        self._tables: set[str] = set()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="slow-backend", daemon=True
        )
        self._thread.start()

    @property
    def requests(self) -> int:
        """Requests received, answered or still waiting."""
        with self._lock:
            return self._requests

    @property
    def events(self) -> int:
        """Events in the JSON arrays posted (one sent twice counts twice)."""
        with self._lock:
            return self._events

    def heard_from(self, table: str) -> bool:
        """Whether any event posted so far names ``table``."""
        with self._lock:
            return table in self._tables

    def _received(self, body: bytes) -> None:
        try:
            posted = json.loads(body) if body else []
        except ValueError:
            posted = []
        events = [e for e in posted if isinstance(e, dict)] if isinstance(posted, list) else []
        with self._lock:
            self._requests += 1
            self._events += len(events)
            self._tables.update(str(e["table"]) for e in events if e.get("table"))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        backend = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the emitter's client expects

            def _answer(self, body: bytes) -> None:
                backend._received(body)
                time.sleep(backend.delay_s)
                answer = json.dumps({"stored": 0}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._answer(self.rfile.read(length))

            def do_GET(self) -> None:
                self._answer(b"")

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a line per request would bury the bench's figures

        return Handler

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
