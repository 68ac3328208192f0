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
- anything else fails at once, naming the stream, its table, the batch, the rows and
  the cause (gRPC code, the server's message, the ``StorageError`` code if any): NOT_FOUND,
  PERMISSION_DENIED, UNAUTHENTICATED, INVALID_ARGUMENT, FAILED_PRECONDITION, row errors.
  Whether BigQuery answered in the stream or ended the connection with it makes no
  difference: a stream or table that does not exist, or a caller without access, fails
  when the connection opens rather than after the retry deadline. A ``StorageError``
  ``STREAM_FINALIZED``, ``STREAM_NOT_FOUND``, ``INVALID_STREAM_STATE`` or
  ``STREAM_ALREADY_COMMITTED`` raises :class:`~onceover_jobs.sink.errors.StreamUnusableError`;
  ``OFFSET_ALREADY_EXISTS`` and ``OFFSET_OUT_OF_RANGE`` take the ALREADY_EXISTS and
  OUT_OF_RANGE paths above, whatever gRPC code came with them.

Which failures are retried, and why UNKNOWN only as a broken transport, is said in
:mod:`onceover_jobs.sink.wire.retry`, for the appender and the unary calls alike.

A request BigQuery refuses for bad rows answers with ``row_errors`` (each row's index in
the request, a code, a message; INVALID_ARGUMENT, and nothing of the request appended);
rows the encoder already knows BigQuery cannot store (``EncodedRows.refused``: DATETIME
text that is none) go the same way before the request is sent.
Without an ``on_row_errors`` handler that fails as above, naming the rows. With one, the
handler names them and returns the request without them (or None when no row is left):
it is sent again at the same offset and every request behind it moves down by the rows
taken out (``rows_refused``), on a new connection (the old one answers the requests
behind with OUT_OF_RANGE). Nothing behind a refused request can have been appended,
since offsets are strict, so moving them loses nothing. On the ``_default`` stream,
which has no offsets, the request goes again behind the others.

The ``_default`` stream takes no offsets: a re-send after an ambiguous failure may
duplicate rows there, which is why ``default`` mode is at-least-once.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, TypeAlias

import grpc

from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import (
    AppendRejectedError,
    ArrowRefusedError,
    DuplicateAppendError,
    RetryDeadlineError,
    StreamUnusableError,
)
from onceover_jobs.sink.wire.arrow_refusal import refused_for_arrow
from onceover_jobs.sink.wire.retry import (
    ALREADY_EXISTS,
    OK,
    OUT_OF_RANGE,
    RESOURCE_EXHAUSTED,
    UNAVAILABLE,
    UNKNOWN,
    RetryPolicy,
    code_name,
    is_retried,
)
from onceover_jobs.sink.wire.schema_lag import SchemaCatchUp
from onceover_jobs.sink.wire.storage_errors import (
    READINGS,
    StorageErrorInfo,
    from_rpc_error,
    from_status,
    reading_of,
    table_of,
    target_text,
)

if TYPE_CHECKING:
    from google.cloud.bigquery_storage_v1 import BigQueryWriteClient, types

    from onceover_jobs.sink.wire.requests import EncodedRows
    from onceover_jobs.sink.wire.write_api import WriteApi

    WriteClient: TypeAlias = WriteApi | BigQueryWriteClient

logger = logging.getLogger(__name__)

STREAM_UNUSABLE = frozenset(
    {"STREAM_FINALIZED", "STREAM_NOT_FOUND", "INVALID_STREAM_STATE", "STREAM_ALREADY_COMMITTED"}
)
"""``StorageError`` codes after which the stream takes no append, whatever is retried."""
_OFFSET_CODES = {"OFFSET_ALREADY_EXISTS": ALREADY_EXISTS, "OFFSET_OUT_OF_RANGE": OUT_OF_RANGE}


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
    encoded: EncodedRows | None = None
    """The encoded rows, for their :attr:`digest`."""
    source: Any = None
    """The request's rows as the writer knows them, for ``on_row_errors`` to name and
    take out (:class:`onceover_jobs.sink.rows.dead_letter.RequestRows`)."""
    sent_at: float = 0.0
    sends: int = 0

    @property
    def digest(self) -> str:
        """Of the encoded rows (committed mode records it with the offset); hashed only
        when asked for (:class:`onceover_jobs.sink.wire.requests.EncodedRows`)."""
        return self.encoded.digest if self.encoded is not None else ""

    @property
    def describe(self) -> str:
        if self.offset is None:
            return f"{self.rows} rows"
        return f"rows at offsets {self.offset}..{self.offset + self.rows - 1}"


@dataclass(frozen=True)
class RowError:
    """One entry of an answer's ``row_errors``: a row BigQuery refused."""

    index: int
    """The row's index in the request."""
    code: str
    message: str


RowErrorHandler = Callable[[PlannedAppend, list[RowError]], "PlannedAppend | None"]
"""Given a refused request and its row errors, the request to send in its place (None:
nothing is left to send); raises to fail the write."""


class AppendListener(Protocol):
    """What the writer hears about each request (it turns these into events)."""

    def acknowledged(self, append: PlannedAppend, latency_ms: float) -> None: ...
    def already_exists(self, append: PlannedAppend) -> None: ...
    def out_of_range(self, append: PlannedAppend, message: str) -> None: ...
    def error(
        self, append: PlannedAppend | None, code: str, message: str, retrying: bool
    ) -> None: ...
    def throttled(self, append: PlannedAppend, message: str, limit_s: float) -> None:
        """BigQuery's throughput quota refused ``append``: the stream waits for it, up
        to ``limit_s``; said once per spell of refusals."""


@dataclass(frozen=True)
class _Failure:
    """An error answer, in the stream or as the status the connection ended with."""

    code: int
    message: str
    storage: StorageErrorInfo | None = None
    broken: bool = False
    """No answer came from the server (ended, timed out, transport failed): the
    outcome of the requests in flight is unknown."""
    connection_lost: bool = False
    """The connection is gone: requests still in flight behind the head go again."""

    @property
    def cause(self) -> str:
        """The gRPC code, the server's message and the StorageError, for messages."""
        text = f"{code_name(self.code)}: {self.message or '(no message)'}"
        return f"{text} [{self.storage}]" if self.storage is not None else text


def _lost(code: grpc.StatusCode, message: str) -> _Failure:
    """A connection that broke without an answer from the server."""
    return _Failure(code.value[0], message, broken=True, connection_lost=True)


_CLOSE = object()
_MIN_WAIT_S = 0.05
"""The shortest wait for a response: one already queued is still taken."""


@dataclass
class _Connection:
    """One AppendRows call: a queue feeding requests, a thread collecting responses."""

    client: WriteClient
    stream: str
    requests: queue.Queue[object] = field(default_factory=queue.Queue)
    responses: queue.Queue[object] = field(default_factory=queue.Queue)
    call: Any = None
    channel: Any = None
    """The channel of the sink's client the call went on (None for a client library's)."""
    ended: threading.Event = field(default_factory=threading.Event)
    """The call is over: its last item (a status, or the stream's end) is in ``responses``."""

    def start(self) -> None:
        def request_iterator() -> Iterator[object]:
            while (item := self.requests.get()) is not _CLOSE:
                yield item

        metadata = (("x-goog-request-params", f"write_stream={self.stream}"),)
        client: Any = self.client
        if hasattr(client, "renew"):  # the sink's own (onceover_jobs.sink.wire.write_api)
            self.channel = client.channel
            self.call = client.append_rows(request_iterator(), metadata=metadata)
        else:  # a client library's BigQueryWriteClient: its raw stream-stream callable
            self.call = client.transport.append_rows(request_iterator(), metadata=metadata)
        threading.Thread(target=self._read, name="onceover-append-reader", daemon=True).start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self.responses.put(response)
            self.responses.put(_lost(grpc.StatusCode.CANCELLED, "stream ended"))
        except grpc.RpcError as exc:
            # The status the server ended the call with (NOT_FOUND at open, say), or one
            # gRPC made up on this side for a transport that failed; is_retried tells.
            status = exc.code() if callable(getattr(exc, "code", None)) else None
            code = status.value[0] if isinstance(status, grpc.StatusCode) else UNKNOWN
            details = exc.details() if callable(getattr(exc, "details", None)) else None
            message = str(details or exc)
            self.responses.put(
                _Failure(code, message, storage=from_rpc_error(exc), connection_lost=True)
            )
        except Exception as exc:  # the reader must always report, never die silently
            self.responses.put(_lost(grpc.StatusCode.UNKNOWN, f"reader failed: {exc!r}"))
        finally:
            self.ended.set()

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
    :class:`~onceover_jobs.sink.errors.SinkError` when the policy gives up.
    """

    def __init__(
        self,
        client: WriteClient,
        stream: str,
        *,
        schema_payload: Callable[[types.AppendRowsRequest], None],
        listener: AppendListener,
        context: str,
        policy: RetryPolicy | None = None,
        max_inflight: int = 4,
        before_send: Callable[[PlannedAppend, list[PlannedAppend]], None] | None = None,
        on_row_errors: RowErrorHandler | None = None,
        offset_shift: int = 0,
        arrow: bool = False,
        schema_catch_up: SchemaCatchUp | None = None,
    ) -> None:
        self.client = client
        self.stream = stream
        self.schema_payload = schema_payload
        self.listener = listener
        self.context = context
        self.policy = policy or RetryPolicy()
        self.max_inflight = max(1, max_inflight)
        self.before_send = before_send
        self.on_row_errors = on_row_errors
        self.schema_catch_up = schema_catch_up
        """The table's columns as the driver read them: a refusal of the writer schema
        naming only these is waited for (wire.schema_lag); None: never."""
        self.arrow = arrow
        """The requests carry Arrow rows: a refusal of that format, before any row is
        acknowledged, raises ArrowRefusedError."""
        self.offset_shift = offset_shift
        """Rows taken out of earlier requests (row errors): a request given to
        :meth:`append` moves down by as many offsets."""
        self.rows_refused = 0
        self.end_offset: int | None = None
        """Where the last request acknowledged (or found applied) ends on the stream."""
        self.inflight: deque[PlannedAppend] = deque()
        self.rows_acknowledged = 0
        self.bytes_acknowledged = 0
        self._connection: _Connection | None = None
        self._schema_sent = False
        self._failures = 0
        self._failing_since: float | None = None
        self._throttled = False
        """This run of failures met the throughput quota: it is waited for longer."""
        self._gap_offsets: set[int] = set()

    # -- public -------------------------------------------------------------------

    def append(self, append: PlannedAppend) -> None:
        try:
            while len(self.inflight) >= self.max_inflight:
                self._receive_one()
            if not self.inflight:
                self._drop_ended_connection()
            if append.offset is not None:
                # After waiting: a refusal answered meanwhile moves this request too.
                append.offset -= self.offset_shift
            while append.encoded is not None and append.encoded.refused:
                replacement = self._refused_unsent(append)
                if replacement is None:
                    return
                append = replacement
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

    def _drop_ended_connection(self) -> None:
        """Forget a connection that ended with nothing in flight: BigQuery closes one idle
        for 10 minutes with ABORTED ("Closing the stream because it has been inactive for
        600 seconds"), a task whose rows come slowly meets it, and since every request
        sent on it was answered, the next one simply goes on a new connection. Not a
        failure: nothing is retried, counted or reported, and the retry deadline does not
        start from it (java-bigquerystorage PR #2942 fixed the same in Google's client)."""
        connection = self._connection
        if connection is None or not connection.ended.is_set():
            return
        self._connection = None
        try:
            last = connection.responses.get_nowait()
        except queue.Empty:
            last = None
        reason = last.cause if isinstance(last, _Failure) else "it ended"
        logger.info("%s: the connection to %s closed (%s); reconnecting", self.context,
                    self.stream, reason)  # fmt: skip

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
            item = connection.responses.get(timeout=self._wait_s())
        except queue.Empty:
            # The connection may be healthy but the server silent: the outcome of what
            # is in flight is unknown, so this is a broken connection.
            item = _lost(grpc.StatusCode.DEADLINE_EXCEEDED, "no response in time")
        head = self.inflight[0]
        if isinstance(item, _Failure):
            self._failed(head, item)
            return
        if failpoints.hit("append.response"):
            # Applied by the server, response lost: all the client knows is that
            # the connection broke.
            self._failed(head, _lost(grpc.StatusCode.UNAVAILABLE, "failpoint: response lost"))
            return
        self._handle(head, item)

    def _wait_s(self) -> float:
        """How long to wait for the next response: ``response_timeout_s``, and while
        failures are being retried no longer than the retry deadline leaves."""
        wait = self.policy.response_timeout_s
        if self._failing_since is not None:
            deadline = self.policy.deadline_for(throttled=self._throttled)
            left = self._failing_since + deadline - time.monotonic()
            wait = min(wait, max(left, _MIN_WAIT_S))
        return wait

    def _handle(self, head: PlannedAppend, response: Any) -> None:
        from google.cloud.bigquery_storage_v1 import types

        raw = types.AppendRowsResponse.pb(response)
        code = raw.error.code if raw.HasField("error") else OK
        if raw.row_errors:
            self._rows_refused(head, raw)
            return
        if code == OK:
            acknowledged = raw.append_result.offset.value if head.offset is not None else None
            if head.offset is not None and acknowledged != head.offset:
                self._reject(
                    head, "INTERNAL", f"acknowledged offset {acknowledged}, expected {head.offset}"
                )
            self._acknowledged(head)
            self.listener.acknowledged(head, (time.perf_counter() - head.sent_at) * 1000)
            return
        message = raw.error.message or _row_errors(raw)
        self._failed(head, _Failure(code, message, storage=from_status(raw.error)))

    def _failed(self, head: PlannedAppend, failure: _Failure) -> None:
        """React to an error answer for ``head`` (the oldest request without one), in
        the stream or as the status the connection ended with (responses come in order,
        so that status answers the oldest request the server had not answered yet)."""
        storage = failure.storage
        code = failure.code
        if storage is not None and storage.code in _OFFSET_CODES:
            code = _OFFSET_CODES[storage.code]  # the offset paths, whatever gRPC code came
        if code == ALREADY_EXISTS and head.offset is not None:
            if not head.may_exist:
                raise DuplicateAppendError(
                    f"{self.context}: BigQuery already holds {head.describe} of "
                    f"{target_text(self.stream)}, but this request was never sent before; "
                    "the offsets are wrong, so the task stops rather than risk a duplicate "
                    f"or a gap ({failure.cause})",
                    stream=self.stream,
                    table=table_of(self.stream),
                    grpc_code=code_name(failure.code),
                    storage_code=storage.code if storage is not None else None,
                )
            self._acknowledged(head)
            self.listener.already_exists(head)
            if failure.connection_lost:
                self._resend_inflight("ALREADY_EXISTS")  # the rest go on a new connection
        elif code == OUT_OF_RANGE and head.offset is not None:
            self.listener.out_of_range(head, failure.message)
            if head.offset in self._gap_offsets:
                self._reject(head, "OUT_OF_RANGE", failure.message, failure)
            self._gap_offsets.add(head.offset)
            self._resend_inflight("OUT_OF_RANGE")
        elif storage is not None and storage.code in STREAM_UNUSABLE:
            self.listener.error(head, code_name(failure.code), failure.cause, False)
            raise StreamUnusableError(
                f"{self.context}: {target_text(self.stream)} takes no more appends "
                f"({failure.cause}); {head.describe} were not written to it",
                stream=self.stream,
                table=table_of(self.stream),
                grpc_code=code_name(failure.code),
                storage_code=storage.code,
            )
        elif (lagging := self._schema_lagging(failure)) is not None:
            # Nothing of the request was appended: it goes again, on a new connection
            # that names the writer schema again, once BigQuery sees the columns.
            self._transient(
                head,
                failure.code,
                f"{failure.message} (the Storage Write API does not see the table's new "
                f"column{'s' if len(lagging) > 1 else ''} {', '.join(lagging)} yet; BigQuery "
                "takes minutes to; a longer retry.deadline_s waits longer)",
            )
        elif is_retried(failure.code, failure.message, broken=failure.broken):
            if failure.broken or (failure.connection_lost and code == UNAVAILABLE):
                self._renew_channel()
            self._transient(head, failure.code, failure.message)
        else:
            self._reject(head, code_name(failure.code), failure.message, failure)

    def _schema_lagging(self, failure: _Failure) -> list[str] | None:
        """The table's columns BigQuery refused the writer schema for because it has not
        caught up with the schema update that added them (wire.schema_lag)."""
        if self.schema_catch_up is None:
            return None
        return self.schema_catch_up.lagging(failure.code, failure.message)

    def _renew_channel(self) -> None:
        """A connection broke: the next one goes on a fresh channel of the sink's client
        (onceover_jobs.sink.wire.write_api), not one gRPC is waiting to reconnect."""
        channel = self._connection.channel if self._connection is not None else None
        renew = getattr(self.client, "renew", None)
        if channel is not None and renew is not None:
            renew(channel)

    def _rows_refused(self, head: PlannedAppend, raw: Any) -> None:
        """BigQuery refused ``head`` for bad rows (module docstring)."""
        errors = [
            RowError(int(e.index), _row_error_code(e.code), str(e.message)) for e in raw.row_errors
        ]
        if self.on_row_errors is None:
            self._reject(head, "INVALID_ARGUMENT", _row_errors(raw))
        replacement = self.on_row_errors(head, errors)  # it reports them (rows_rejected)
        removed = head.rows - (replacement.rows if replacement is not None else 0)
        if removed <= 0:
            self._reject(head, "INVALID_ARGUMENT", f"no row taken out: {_row_errors(raw)}")
        self.inflight.popleft()
        self.rows_refused += removed
        if head.offset is None:  # the _default stream: no offsets to keep in order
            if replacement is not None:
                self.inflight.append(replacement)
                self._send(replacement)
            return
        self.offset_shift += removed
        for later in self.inflight:
            assert later.offset is not None
            later.offset -= removed
            # Never sent at its new offset, and never applied at its old one (the
            # refused request before it was not): ALREADY_EXISTS for it is wrong offsets.
            later.may_exist, later.sends = False, 0
        if replacement is not None:
            self.inflight.appendleft(replacement)
        self._resend_inflight("rows refused")

    def _refused_unsent(self, append: PlannedAppend) -> PlannedAppend | None:
        """A request whose encoder found rows BigQuery cannot store (``encoded.refused``)
        goes as one BigQuery refused: its rows go to the row-error handler, and what it
        returns is sent in its place at its offset; the requests behind move down. It
        is recorded (``before_send``) as sent, as a refused request is."""
        assert append.encoded is not None
        errors = [
            RowError(index, "FIELDS_ERROR", message) for index, message in append.encoded.refused
        ]
        described = "; ".join(f"row {e.index}: {e.message}" for e in errors[:20])
        if self.on_row_errors is None:
            self._reject(append, "INVALID_ARGUMENT", described)
        if self.before_send is not None:
            self.before_send(append, list(self.inflight))
        replacement = self.on_row_errors(append, errors)  # it reports them (rows_rejected)
        removed = append.rows - (replacement.rows if replacement is not None else 0)
        if removed <= 0:
            self._reject(append, "INVALID_ARGUMENT", f"no row taken out: {described}")
        self.rows_refused += removed
        if append.offset is not None:
            self.offset_shift += removed
        return replacement

    def _acknowledged(self, head: PlannedAppend) -> None:
        self.inflight.popleft()
        if head.offset is not None:
            self.end_offset = head.offset + head.rows
        self.rows_acknowledged += head.rows
        self.bytes_acknowledged += head.bytes
        self._failures = 0
        self._failing_since = None
        self._throttled = False

    def _transient(self, head: PlannedAppend, code: int, message: str) -> None:
        now = time.monotonic()
        self._failing_since = self._failing_since or now
        self._failures += 1
        if code == RESOURCE_EXHAUSTED and not self._throttled:
            # The throughput quota: every append is refused until it refills, which
            # takes up to 10 minutes; waited for, not counted against deadline_s.
            self._throttled = True
            self.listener.throttled(head, message, self.policy.throttle_deadline_s)
        deadline = self.policy.deadline_for(throttled=self._throttled)
        elapsed = now - self._failing_since
        retrying = elapsed < deadline
        self.listener.error(head, code_name(code), message, retrying)
        if not retrying:
            if self._throttled:
                raise RetryDeadlineError(
                    f"{self.context}: BigQuery's throughput quota refused {head.describe} of "
                    f"{target_text(self.stream)} for {elapsed:.0f} s, {self._failures} tries "
                    f"(retry.throttle_s {deadline:g} s): {message}. Ask for more AppendRows "
                    "throughput quota, or write with fewer partitions at once; a larger "
                    "retry.throttle_s waits longer"
                )
            raise RetryDeadlineError(
                f"{self.context}: {code_name(code)} from BigQuery for {head.describe} of "
                f"{target_text(self.stream)} kept failing for {elapsed:.0f} s, "
                f"{self._failures} failures (retry deadline {self.policy.deadline_s:.0f} s): "
                f"{message}"
            )
        delay = min(
            self.policy.backoff(self._failures, throttled=self._throttled), deadline - elapsed
        )
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

    def _reject(
        self, head: PlannedAppend, code: str, message: str, failure: _Failure | None = None
    ) -> NoReturn:
        storage = failure.storage if failure is not None else None
        cause = f"{message} [{storage}]" if storage is not None else message
        if (reading := reading_of(code, message, storage)) is not None:
            cause = f"{cause or '(no message)'}: {READINGS[reading]}"
        self.listener.error(head, code, cause, False)
        error, what = AppendRejectedError, head.describe
        if self.arrow and not self.rows_acknowledged and refused_for_arrow(code, message):
            # Nothing of the stream was applied: the caller may send the rows as proto.
            error, what = ArrowRefusedError, "Arrow rows"
        raise error(
            f"{self.context}: BigQuery refused {what} of {target_text(self.stream)} "
            f"({code}): {cause or '(no message)'}",
            stream=self.stream,
            table=table_of(self.stream),
            grpc_code=code,
            storage_code=storage.code if storage is not None else None,
        )


def _row_error_code(code: int) -> str:
    from google.cloud.bigquery_storage_v1 import types

    try:
        return str(types.RowError.RowErrorCode(code).name)
    except ValueError:
        return f"CODE_{code}"


def _row_errors(raw: Any) -> str:
    shown = [f"row {e.index}: {e.message}" for e in list(raw.row_errors)[:10]]
    more = len(raw.row_errors) - len(shown)
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
