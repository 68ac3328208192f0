"""``idle_connections``: an AppendRows connection idle too long is closed with ABORTED.

BigQuery ends an AppendRows connection on which no request has come for 10 minutes:
"Closing the stream because it has been inactive for 600 seconds. Entity: <stream>",
with gRPC status ABORTED (python-bigquery-storage #593, nodejs-bigquery-storage #427;
java-bigquerystorage PR #2942: "An idle connection will be closed by the server after 10
minutes of inactivity"). The stream itself lives on; only the connection goes. bqemulator
keeps a connection open for as long as the client does.

The patch reads each connection's requests on a thread of its own and, when none has come
for ``connection_idle_s`` (read at every wait, so a test can shorten it), ends the call
with ABORTED and BigQuery's message, naming the connection's stream (its first request's
``write_stream``). Requests already answered stay answered; a request sent after the close
never reaches the server, as on BigQuery.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_connection_idle_past_its_time_is_closed_with_aborted``.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.append_answers import leading_write_stream
from onceover_tools.localbq.patches.wrapping import wrap

_END = object()


class _IdleGuard:
    """The connection's requests, as the handler reads them, until one is too long in
    coming: then the call is ended with ABORTED."""

    def __init__(self, requests: Iterator[bytes], context: Any) -> None:
        self._context = context
        self._queue: queue.Queue[object] = queue.Queue()
        self.stream = ""
        threading.Thread(
            target=self._pull, args=(requests,), name="localbq-append-requests", daemon=True
        ).start()

    def _pull(self, requests: Iterator[bytes]) -> None:
        # A call cancelled or closed ends its iterator with an error: nothing more comes.
        with contextlib.suppress(Exception):
            for request_bytes in requests:
                self._queue.put(request_bytes)
        self._queue.put(_END)

    def __iter__(self) -> _IdleGuard:
        return self

    def __next__(self) -> bytes:
        last = time.monotonic()
        while True:
            idle_s = limits.WRITE_API_LIMITS.connection_idle_s
            left = last + idle_s - time.monotonic()
            try:
                item = self._queue.get(timeout=max(left, 0.0))
            except queue.Empty:
                if time.monotonic() - last < limits.WRITE_API_LIMITS.connection_idle_s:
                    continue  # the setting was lengthened meanwhile
                self._close(idle_s)
                raise StopIteration from None
            if item is _END:
                raise StopIteration
            assert isinstance(item, bytes)
            self.stream = self.stream or leading_write_stream(item)
            return item

    def _close(self, idle_s: float) -> None:
        import grpc

        self._context.set_code(grpc.StatusCode.ABORTED)
        self._context.set_details(
            f"Closing the stream because it has been inactive for {idle_s:g} seconds. "
            f"Entity: {self.stream}"
        )


def apply() -> None:
    """End AppendRows connections idle longer than ``connection_idle_s`` with ABORTED."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler

    def make_handle(
        original: Callable[..., Generator[bytes, None, None]],
    ) -> Callable[..., Generator[bytes, None, None]]:
        def _handle_append_rows(
            handler: Any, request_iterator: Iterator[bytes], context: Any
        ) -> Generator[bytes, None, None]:
            yield from original(handler, _IdleGuard(request_iterator, context), context)

        return _handle_append_rows

    # service() looks the handler up on the instance at each call.
    wrap(BigQueryWriteHandler, "_handle_append_rows", make_handle)
