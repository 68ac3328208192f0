"""Appends to one write stream with explicit offsets, pipelined, under the retry policy.

This is invariant 1 of the design, in one place:

- every append to an application stream carries its offset; responses arrive in
  order, so the oldest unacknowledged request is the one a response answers;
- ALREADY_EXISTS is success only for a request that may have been applied before:
  one re-sent after an ambiguous failure (a lost response, a broken connection), or
  one a retried task re-sends inside the range its earlier attempt recorded as sent.
  For any other request it means the offsets are wrong, and the task fails;
- OUT_OF_RANGE (a gap: the server expects an earlier offset) rewinds once to the first
  unacknowledged request and re-sends from there; a second gap at the same offset fails;
- UNAVAILABLE, INTERNAL, ABORTED, RESOURCE_EXHAUSTED, DEADLINE_EXCEEDED, CANCELLED and a
  broken connection reconnect and re-send every unacknowledged request, with
  exponential backoff and jitter, until the retry deadline;
- INVALID_ARGUMENT, row errors and anything else fail the task with a message naming
  the stream, the batch and the rows.

The ``_default`` stream takes no offsets: a re-send after an ambiguous failure may
duplicate rows there, which is why ``default`` mode is at-least-once.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import grpc

from jobs.sink import failpoints
from jobs.sink.errors import (
    AppendRejectedError,
    DuplicateAppendError,
    RetryDeadlineError,
)

if TYPE_CHECKING:
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types

logger = logging.getLogger(__name__)

OK = 0
ALREADY_EXISTS = grpc.StatusCode.ALREADY_EXISTS.value[0]
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE.value[0]
TRANSIENT = frozenset(
    code.value[0]
    for code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
    )
)
_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}


def code_name(code: int) -> str:
    return str(_CODE_NAMES.get(code, f"CODE_{code}"))


@dataclass
class PlannedAppend:
    """One append request and what it covers."""

    offset: int | None
    rows: int
    bytes: int
    rows_payload: Any
    """Sets the rows on a request: ``fn(request, with_schema: bool) -> None``."""
    may_exist: bool = False
    """An identical request may already have been applied (a re-send)."""
    digest: str = ""
    """Of the encoded rows (committed mode records it with the offset)."""
    sent_at: float = 0.0
    sends: int = 0

    @property
    def describe(self) -> str:
        if self.offset is None:
            return f"{self.rows} rows"
        return f"rows at offsets {self.offset}..{self.offset + self.rows - 1}"


@dataclass(frozen=True)
class RetryPolicy:
    deadline_s: float = 300.0
    initial_backoff_s: float = 0.1
    max_backoff_s: float = 10.0
    response_timeout_s: float = 120.0

    def backoff(self, failures: int) -> float:
        """Exponential backoff with full jitter (AWS style): uniform in [0, cap]."""
        cap = min(self.max_backoff_s, self.initial_backoff_s * (2 ** max(0, failures - 1)))
        return random.uniform(cap / 2, cap)  # noqa: S311 - jitter, not security


class AppendListener(Protocol):
    """What the writer hears about each request (it turns these into events)."""

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None: ...
    def already_exists(self, append: PlannedAppend) -> None: ...
    def out_of_range(self, append: PlannedAppend, message: str) -> None: ...
    def error(
        self, append: PlannedAppend | None, code: str, message: str, retrying: bool
    ) -> None: ...


class _AmbiguousError(Exception):
    """The outcome of the in-flight requests is unknown: reconnect and re-send them."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(message)


_CLOSE = object()


@dataclass
class _Connection:
    """One AppendRows call: a queue feeding requests, a thread collecting responses."""

    client: BigQueryWriteClient
    stream: str
    requests: queue.Queue[object] = field(default_factory=queue.Queue)
    responses: queue.Queue[object] = field(default_factory=queue.Queue)
    call: Any = None

    def start(self) -> None:
        def request_iterator() -> Iterator[object]:
            while (item := self.requests.get()) is not _CLOSE:
                yield item

        metadata = (("x-goog-request-params", f"write_stream={self.stream}"),)
        rpc: Any = self.client.transport.append_rows  # the raw gRPC stream-stream callable
        self.call = rpc(request_iterator(), metadata=metadata)
        threading.Thread(target=self._read, name="onceover-append-reader", daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self.responses.put(response)
            self.responses.put(_AmbiguousError(grpc.StatusCode.CANCELLED.value[0], "stream ended"))
        except grpc.RpcError as exc:
            code = exc.code().value[0] if exc.code() is not None else 2
            self.responses.put(_AmbiguousError(code, exc.details() or str(exc)))
        except Exception as exc:  # the reader must always report, never die silently
            self.responses.put(_AmbiguousError(grpc.StatusCode.UNKNOWN.value[0], repr(exc)))

    def send(self, request: object) -> None:
        self.requests.put(request)

    def close(self, *, cancel: bool = False) -> None:
        self.requests.put(_CLOSE)
        if cancel and self.call is not None:
            self.call.cancel()


class StreamAppender:
    """Sends :class:`PlannedAppend` requests to one stream and sees each acknowledged.

    ``append`` returns once the request is in flight (up to ``max_inflight`` at once);
    ``flush`` returns once every request sent is acknowledged. Either raises a
    :class:`~jobs.sink.errors.SinkError` when the policy gives up.
    """

    def __init__(
        self,
        client: BigQueryWriteClient,
        stream: str,
        *,
        schema_payload: Callable[[types.AppendRowsRequest], None],
        listener: AppendListener,
        context: str,
        policy: RetryPolicy | None = None,
        max_inflight: int = 4,
        before_send: Callable[[PlannedAppend, list[PlannedAppend]], None] | None = None,
    ) -> None:
        self.client = client
        self.stream = stream
        self.schema_payload = schema_payload
        self.listener = listener
        self.context = context
        self.policy = policy or RetryPolicy()
        self.max_inflight = max(1, max_inflight)
        self.before_send = before_send
        self.inflight: deque[PlannedAppend] = deque()
        self.rows_acknowledged = 0
        self.bytes_acknowledged = 0
        self._connection: _Connection | None = None
        self._schema_sent = False
        self._failures = 0
        self._failing_since: float | None = None
        self._gap_offsets: set[int] = set()

    # -- public -------------------------------------------------------------------

    def append(self, append: PlannedAppend) -> None:
        try:
            while len(self.inflight) >= self.max_inflight:
                self._receive_one()
            self.inflight.append(append)
            self._send(append)
        except BaseException:
            self.close()  # a connection left open holds a server thread forever
            raise

    def flush(self) -> None:
        try:
            while self.inflight:
                self._receive_one()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # -- sending ------------------------------------------------------------------

    def _ensure_connection(self) -> _Connection:
        if self._connection is None:
            from google.cloud.bigquery_storage_v1 import types  # noqa: F401 - proto-plus types

            self._connection = _Connection(self.client, self.stream)
            self._schema_sent = False
            self._connection.start()
        return self._connection

    def _send(self, append: PlannedAppend) -> None:
        from google.cloud.bigquery_storage_v1 import types

        if self.before_send is not None:
            self.before_send(append, list(self.inflight))
        connection = self._ensure_connection()
        request = types.AppendRowsRequest()
        if not self._schema_sent:
            # The first request of a connection names the stream and the schema.
            request.write_stream = self.stream
            self.schema_payload(request)
            self._schema_sent = True
        if append.offset is not None:
            request.offset = append.offset  # type: ignore[assignment]  # proto-plus wraps it
        append.rows_payload(request)
        if append.sends:
            append.may_exist = True
        append.sends += 1
        append.sent_at = time.perf_counter()
        if failpoints.hit("append.before"):
            # The request is lost on the way: the server never sees it, and the client
            # learns of it only as a connection that ended without its response.
            connection.close()
            return
        connection.send(request)

    def _resend_inflight(self, reason: str) -> None:
        """Reconnect and send every unacknowledged request again, in order."""
        if self._connection is not None:
            # Half-close rather than cancel: the server finishes what it holds (its
            # answers are ignored; re-sent requests are identical) and frees its thread.
            self._connection.close()
            self._connection = None
        logger.info(
            "%s: reconnecting %s, re-sending %d requests",
            self.context,
            self.stream,
            len(self.inflight),
        )
        for append in list(self.inflight):
            self._send(append)

    # -- receiving ----------------------------------------------------------------

    def _receive_one(self) -> None:
        connection = self._ensure_connection()
        try:
            item = connection.responses.get(timeout=self.policy.response_timeout_s)
        except queue.Empty:
            item = _AmbiguousError(
                grpc.StatusCode.DEADLINE_EXCEEDED.value[0], "no response in time"
            )
        head = self.inflight[0]
        if isinstance(item, _AmbiguousError):
            self._transient(head, item.code, str(item))
            return
        if failpoints.hit("append.response"):
            # Applied by the server, response lost: all the client knows is that
            # the connection broke.
            self._transient(head, grpc.StatusCode.UNAVAILABLE.value[0], "failpoint: response lost")
            return
        self._handle(head, item)

    def _handle(self, head: PlannedAppend, response: Any) -> None:
        from google.cloud.bigquery_storage_v1 import types

        raw = types.AppendRowsResponse.pb(response)
        code = raw.error.code if raw.HasField("error") else OK
        if code == OK:
            if raw.row_errors:
                self._reject(head, "INVALID_ARGUMENT", _row_errors(raw))
            acknowledged = raw.append_result.offset.value if head.offset is not None else None
            if head.offset is not None and acknowledged != head.offset:
                self._reject(
                    head, "INTERNAL", f"acknowledged offset {acknowledged}, expected {head.offset}"
                )
            self._acknowledged(head)
            self.listener.acknowledged(head, (time.perf_counter() - head.sent_at) * 1000)
        elif code == ALREADY_EXISTS and head.offset is not None:
            if not head.may_exist:
                raise DuplicateAppendError(
                    f"{self.context}: BigQuery already holds {head.describe} of {self.stream}, "
                    "but this request was never sent before; the offsets are wrong, so "
                    "the task stops rather than risk a duplicate or a gap"
                )
            self._acknowledged(head)
            self.listener.already_exists(head)
        elif code == OUT_OF_RANGE and head.offset is not None:
            self.listener.out_of_range(head, raw.error.message)
            if head.offset in self._gap_offsets:
                self._reject(head, "OUT_OF_RANGE", raw.error.message)
            self._gap_offsets.add(head.offset)
            self._resend_inflight("OUT_OF_RANGE")
        elif code in TRANSIENT:
            self._transient(head, code, raw.error.message)
        else:
            self._reject(head, code_name(code), raw.error.message or _row_errors(raw))

    def _acknowledged(self, head: PlannedAppend) -> None:
        self.inflight.popleft()
        self.rows_acknowledged += head.rows
        self.bytes_acknowledged += head.bytes
        self._failures = 0
        self._failing_since = None

    def _transient(self, head: PlannedAppend, code: int, message: str) -> None:
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        self._failures += 1
        elapsed = now - self._failing_since
        retrying = elapsed < self.policy.deadline_s
        self.listener.error(head, code_name(code), message, retrying)
        if not retrying:
            raise RetryDeadlineError(
                f"{self.context}: {code_name(code)} from BigQuery for {head.describe} of "
                f"{self.stream} kept failing for {elapsed:.0f} s "
                f"(retry deadline {self.policy.deadline_s:.0f} s): {message}"
            )
        delay = min(self.policy.backoff(self._failures), self.policy.deadline_s - elapsed)
        logger.warning(
            "%s: %s on %s (%s); retry %d in %.2f s",
            self.context,
            code_name(code),
            self.stream,
            message,
            self._failures,
            delay,
        )
        time.sleep(max(0.0, delay))
        self._resend_inflight(code_name(code))

    def _reject(self, head: PlannedAppend, code: str, message: str) -> None:
        self.listener.error(head, code, message, False)
        raise AppendRejectedError(
            f"{self.context}: BigQuery refused {head.describe} of {self.stream} ({code}): {message}"
        )


def _row_errors(raw: Any) -> str:
    shown = [f"row {e.index}: {e.message}" for e in list(raw.row_errors)[:10]]
    more = len(raw.row_errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
