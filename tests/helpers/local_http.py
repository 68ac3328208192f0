"""A local HTTP server for tests that can go down (port closed, open keep-alive
connections cut) and come back up on the same port: the base of the stand-ins for the
control plane's intake and for a webhook receiver."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, cast


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, handler: type[BaseHTTPRequestHandler], owner: Any) -> None:
        self.owner = owner
        self.connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", port), handler)


class TrackedHandler(BaseHTTPRequestHandler):
    """Keeps its connection known to the server (so ``down`` can cut it); quiet."""

    protocol_version = "HTTP/1.1"  # keep-alive, as uvicorn does
    disable_nagle_algorithm = True  # headers and body go out in two writes

    @property
    def owner(self) -> Any:
        """The :class:`LocalServer` this request reached."""
        return cast(_Server, self.server).owner

    def setup(self) -> None:
        super().setup()
        cast(_Server, self.server).connections.add(self.connection)

    def finish(self) -> None:
        cast(_Server, self.server).connections.discard(self.connection)
        super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class JsonPostHandler(TrackedHandler):
    """Answers each POST with the status and JSON body its owner's
    ``receive(path, authorization, body)`` returns."""

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        status, answer = self.owner.receive(self.path, self.headers.get("Authorization"), body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class LocalServer:
    """Serves ``handler`` on 127.0.0.1 (a free port first, the same one after)."""

    handler: ClassVar[type[TrackedHandler]]

    def __init__(self) -> None:
        self.port = 0
        self._server: _Server | None = None

    def up(self) -> None:
        self._server = _Server(self.port, self.handler, self)
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
