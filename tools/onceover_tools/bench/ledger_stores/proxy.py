"""A counting reverse proxy in front of a stand-in: every request any process sends the
store goes through it, is classified as the store's API names it and timed upstream.

Counting at the server, not in a client, is what makes the count complete: the driver
and each Python worker hold clients of their own (their counters die with them), and a
client's retries, redirects and pagination are requests too. The proxy forwards each
request unchanged (``Host`` included: the stand-ins build links from it, and S3's
signature covers it) and answers with the upstream's status, headers and body.
"""

from __future__ import annotations

import http.client
import http.server
import logging
import threading
import time
from dataclasses import dataclass
from typing import Self
from urllib.parse import urlsplit

from onceover.processes import StartStop
from onceover_tools.bench.ledger_stores.api import StoreApi

logger = logging.getLogger(__name__)

HOP_BY_HOP = frozenset({
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length",
})  # fmt: skip
"""Headers of one connection, not of the request: the proxy sets its own."""
UPSTREAM_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Request:
    """One request the proxy forwarded: its kind and bucket, the upstream's answer and
    how long the upstream took (request sent to answer read)."""

    kind: str
    bucket: str
    status: int
    seconds: float


class CountingProxy(StartStop):
    """A proxy on ``host`` (a free port) forwarding to ``upstream`` (``http://host:port``),
    recording each request, classified by ``api``.

    ::

        with CountingProxy(s3.endpoint, S3Api()) as proxy:
            mark = proxy.mark()
            ...  # clients pointed at proxy.endpoint
            requests = proxy.since(mark, bucket="b")
    """

    def __init__(self, upstream: str, api: StoreApi, *, host: str = "127.0.0.1") -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream {upstream!r}: give http://host:port")
        self.upstream = (parts.hostname, parts.port)
        self.api = api
        self.host = host
        self._lock = threading.Lock()
        self._requests: list[Request] = []
        self._server: http.server.ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        if self._server is None:
            raise RuntimeError("the proxy is not started")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def record(self, request: Request) -> None:
        with self._lock:
            self._requests.append(request)

    def mark(self) -> int:
        """A point in the record: the requests forwarded so far."""
        with self._lock:
            return len(self._requests)

    def since(
        self, mark: int, end: int | None = None, *, bucket: str | None = None
    ) -> list[Request]:
        """The requests between ``mark`` and ``end`` (now, when None), those for
        ``bucket`` only when one is named."""
        with self._lock:
            chosen = self._requests[mark:end]
        return [r for r in chosen if bucket is None or r.bucket == bucket]

    def start(self) -> Self:
        server = http.server.ThreadingHTTPServer((self.host, 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1},
            name=f"counting-proxy-{self.api.scheme}", daemon=True,
        )  # fmt: skip
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None


def _handler(proxy: CountingProxy) -> type[http.server.BaseHTTPRequestHandler]:
    class Forward(http.server.BaseHTTPRequestHandler):
        # Keep-alive, as the stores serve: a client's connection pool is part of what it
        # costs, and a proxy closing every connection would add a handshake per request.
        protocol_version = "HTTP/1.1"
        upstream: http.client.HTTPConnection | None = None

        def log_message(self, format: str, *args: object) -> None:
            logger.debug(format, *args)

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while (size := int(self.rfile.readline().split(b";")[0].strip(), 16)) > 0:
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, body: bytes) -> http.client.HTTPResponse:
            """The request upstream, on this connection's own upstream connection (one
            retry on a fresh one: the upstream may have closed an idle one)."""
            for attempt in range(2):
                if self.upstream is None:
                    self.upstream = http.client.HTTPConnection(
                        *proxy.upstream, timeout=UPSTREAM_TIMEOUT_S
                    )
                try:
                    self.upstream.putrequest(
                        self.command, self.path, skip_host=True, skip_accept_encoding=True
                    )
                    for name, value in self.headers.items():
                        if name.lower() not in HOP_BY_HOP:
                            self.upstream.putheader(name, value)
                    if body or self.command in ("PUT", "POST", "PATCH"):
                        self.upstream.putheader("Content-Length", str(len(body)))
                    self.upstream.endheaders(body or None)
                    return self.upstream.getresponse()
                except (ConnectionError, http.client.HTTPException):
                    self.upstream.close()
                    self.upstream = None
                    if attempt:
                        raise
            raise AssertionError("unreachable")

        def _forward(self) -> None:
            body = self._body()
            classified = proxy.api.classify(self.command, self.path)
            started = time.perf_counter()
            try:
                answer = self._send(body)
                payload = answer.read()
            except (OSError, http.client.HTTPException) as exc:
                seconds = time.perf_counter() - started
                proxy.record(Request(classified.kind, classified.bucket, 502, seconds))
                self.send_error(502, f"upstream: {type(exc).__name__}")
                return
            seconds = time.perf_counter() - started
            proxy.record(Request(classified.kind, classified.bucket, answer.status, seconds))
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            if self.command == "HEAD":  # the length of the body a GET would have sent
                self.send_header("Content-Length", answer.getheader("Content-Length") or "0")
            else:
                self.send_header("Content-Length", str(len(payload)))
            if answer.will_close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD" and payload:
                self.wfile.write(payload)
            if answer.will_close and self.upstream is not None:
                self.upstream.close()
                self.upstream = None

        def finish(self) -> None:
            super().finish()
            if self.upstream is not None:
                self.upstream.close()

        do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = _forward  # noqa: N815 - http.server names them

    return Forward
