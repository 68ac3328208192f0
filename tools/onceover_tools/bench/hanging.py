"""A BigQuery that never answers: TCP listeners that accept connections and stay silent.

This is how a black-holed network, a hung proxy or a stuck load balancer looks to a
client: the connection is made, then nothing comes back, so only the client's own
deadlines end its calls (a refused connection, by contrast, fails at once). The
starvation test and the control-plane bench point the backend's REST and gRPC
endpoints here.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Self

from onceover.bigquery import BigQueryConfig

HELD = 256
"""Connections held open at most; later ones are closed at once (a bounded stand-in)."""


class Closing:
    """``with`` closes it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class Unanswering(Closing):
    """Accepts connections on 127.0.0.1 and never reads or writes; ``close`` ends it."""

    def __init__(self, limit: int = HELD) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._listener.settimeout(0.05)  # so the accept loop sees close() soon
        self.port: int = self._listener.getsockname()[1]
        self._limit = limit
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.accepted = 0
        self._thread = threading.Thread(
            target=self._accept, name=f"unanswering-{self.port}", daemon=True
        )
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                self.accepted += 1
                if len(self._held) < self._limit and not self._closed.is_set():
                    self._held.append(connection)
                    continue
            connection.close()

    def close(self) -> None:
        """Stop listening and cut every connection held (their callers fail at once)."""
        self._closed.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            held, self._held = self._held, []
        for connection in held:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()


class HangingBigQuery(Closing):
    """A REST and a gRPC endpoint that both accept and never answer."""

    def __init__(self) -> None:
        self.rest = Unanswering()
        self.grpc = Unanswering()
        self.config = BigQueryConfig(
            rest_endpoint=f"http://127.0.0.1:{self.rest.port}",
            grpc_endpoint=f"127.0.0.1:{self.grpc.port}",
        )

    def close(self) -> None:
        self.rest.close()
        self.grpc.close()
