"""A gRPC proxy in front of the Storage Write API that injects faults the sink cannot see.

The sink's own failpoints fire inside its code; these happen on the wire, where a
real network or a real BigQuery front end would fail. The proxy forwards every
method of ``google.cloud.bigquery.storage.v1.BigQueryWrite`` as raw bytes (it never
decodes a message), and a :class:`WireFault` in its plan turns the n-th call of a
unary method, or the n-th message of ``AppendRows``, into one of:

- ``unavailable``: answer UNAVAILABLE *before* forwarding; the server never sees it.
- ``drop_response``: forward, wait for the server's answer, then break the call
  with UNAVAILABLE instead of passing the answer on. The request **was applied**;
  the client cannot know.
- ``delay``: hold the request for a while before forwarding it.
- ``cut``: ``AppendRows`` only: forward the message, then cut the call at once in
  both directions (upstream cancelled, the client told UNAVAILABLE). Whether the
  server applied the message, and the ones in flight before it, is left to chance.
- ``kill``: ``AppendRows`` only: forward the message and, when its answer comes and
  before the client gets it, hand the client's address to a callback (the chaos
  harness kills the Spark task that sent it).
- ``late_duplicate``: ``AppendRows`` only: forward the message as usual and, ``delay_s``
  later, send a copy of it again on a call of its own (the connection's stream name and
  writer schema put in from its first message when the copy lacks them), as a zombie
  task attempt or a front end's retry would: the request **applied twice, the second
  time late**, after whatever the client sent since. At :meth:`FaultProxy.stop` every
  copy not yet sent is sent, so each lands before a verdict. A stream with offsets
  answers ALREADY_EXISTS; the ``_default`` stream applies it again.
- ``uncommitted``: ``BatchCommitWriteStreams`` only: answer, without forwarding, with
  neither ``commit_time`` nor ``stream_errors``. BigQuery's API: "if this field is not
  set, it means the commit was not successful". Nothing was committed; a client that
  reads the empty answer as success loses the batch.
- ``gap``: ``AppendRows`` only: forward the message with its offset moved past the
  end of the stream, as a client that skipped a request would send it. The server
  answers OUT_OF_RANGE and applies nothing; the call goes on. (The one fault here that
  decodes a message: no failure of the wire alone makes the server see a gap, since
  a stream's messages arrive in order or not at all.) A message without an offset
  (the ``_default`` stream) passes unchanged and the fault does not fire.

Counters are per proxy, so they run across every restart of a job. What fired is
kept in :attr:`FaultProxy.fired`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Literal, Self

import grpc

from onceover.bigquery import GRPC_OPTIONS
from onceover.processes import StartStop

logger = logging.getLogger(__name__)

SERVICE = "/google.cloud.bigquery.storage.v1.BigQueryWrite/"
APPEND_ROWS = "AppendRows"
UNARY_METHODS = (
    "CreateWriteStream",
    "GetWriteStream",
    "FinalizeWriteStream",
    "BatchCommitWriteStreams",
    "FlushRows",
)
WireAction = Literal[
    "unavailable", "drop_response", "delay", "cut", "kill", "gap", "uncommitted", "late_duplicate"
]
STREAM_ONLY: frozenset[str] = frozenset({"cut", "kill", "gap", "late_duplicate"})
COMMIT_ONLY: frozenset[str] = frozenset({"uncommitted"})
BATCH_COMMIT = "BatchCommitWriteStreams"
GAP_ROWS = 1_000_000
"""How far ``gap`` moves an offset: past any stream a test or the demo writes."""

# Set by gRPC itself; forwarding them is refused or wrong.
_HOP_BY_HOP = ("user-agent", "grpc-", ":")


@dataclass(frozen=True)
class WireFault:
    """Do ``action`` to the ``nth`` call (unary) or message (``AppendRows``) of ``method``."""

    action: WireAction
    method: str
    nth: int
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.method != APPEND_ROWS and self.method not in UNARY_METHODS:
            raise ValueError(f"unknown Storage Write method {self.method!r}")
        if self.action in STREAM_ONLY and self.method != APPEND_ROWS:
            raise ValueError(f"{self.action} applies to AppendRows only, not {self.method}")
        if self.action in COMMIT_ONLY and self.method != BATCH_COMMIT:
            raise ValueError(f"{self.action} applies to {BATCH_COMMIT} only, not {self.method}")
        if self.nth < 1:
            raise ValueError("nth counts from 1")


@dataclass(frozen=True)
class FiredWireFault:
    fault: WireFault
    at: float
    """``time.monotonic()`` when it fired."""
    detail: str = ""


class _AbortError(Exception):
    """The proxy decided to break the call with this status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code = code
        super().__init__(message)


class FaultProxy(StartStop):
    """Forward ``BigQueryWrite`` calls to ``upstream``, injecting the faults of ``plan``."""

    def __init__(
        self,
        upstream: str,
        plan: Sequence[WireFault] = (),
        *,
        on_kill: Callable[[str, str], str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.upstream = upstream
        self.plan = list(plan)
        self.on_kill = on_kill
        """Called with the client's peer address (``ipv4:127.0.0.1:54321``) and the
        proxy's own endpoint, the connection's two ends; says what it did."""
        self.host = host
        self.port = 0
        self.fired: list[FiredWireFault] = []
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._channel: grpc.Channel | None = None
        self._server: grpc.Server | None = None
        self._late: list[_LateCopy] = []
        self.open_append_calls = 0
        """AppendRows calls under way now: the connections' streams a client holds open."""

    @property
    def endpoint(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Self:
        self._channel = grpc.insecure_channel(self.upstream, options=GRPC_OPTIONS)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), options=GRPC_OPTIONS)
        server.add_generic_rpc_handlers([_Handler(self)])
        self.port = server.add_insecure_port(f"{self.host}:0")
        server.start()
        self._server = server
        logger.debug("fault proxy on %s in front of %s", self.endpoint, self.upstream)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None
        for late in self._late:  # each copy lands, late, before anyone judges the table
            late.send_now()
        self._late.clear()
        if self._channel is not None:
            self._channel.close()
            self._channel = None

    # -- the plan -----------------------------------------------------------------

    def arm_next(self, action: WireAction, method: str = APPEND_ROWS) -> WireFault:
        """Do ``action`` to the next call (unary) or message (``AppendRows``) of
        ``method``: a fault at a moment of the caller's choosing, not at a count drawn
        ahead (``onceover soak``'s faults, one every few minutes)."""
        with self._lock:
            fault = WireFault(action, method, self._counts.get(method, 0) + 1)
            self.plan.append(fault)
        return fault

    def fired_since(self, index: int) -> list[FiredWireFault]:
        """The faults fired after the first ``index``."""
        with self._lock:
            return self.fired[index:]

    def _next(self, counter: str) -> int:
        with self._lock:
            self._counts[counter] = self._counts.get(counter, 0) + 1
            return self._counts[counter]

    def _faults(self, method: str, nth: int, actions: Sequence[str]) -> list[WireFault]:
        return [f for f in self.plan if f.method == method and f.nth == nth and f.action in actions]

    def _fire(self, fault: WireFault, detail: str = "") -> None:
        with self._lock:
            self.fired.append(FiredWireFault(fault, time.monotonic(), detail))
        logger.debug("fired: %s %s #%d %s", fault.action, fault.method, fault.nth, detail)

    def _gapped(self, nth: int, request: bytes) -> bytes:
        """``request``, its offset moved if a ``gap`` fault falls on message ``nth``."""
        for fault in self._faults(APPEND_ROWS, nth, ("gap",)):
            moved, detail = _with_gap(request)
            if detail:
                self._fire(fault, detail)
                return moved
        return request

    def _send_later(
        self, nth: int, first: list[bytes], request: bytes, metadata: list[tuple[str, str | bytes]]
    ) -> None:
        """Schedule the copies of message ``nth`` that a ``late_duplicate`` asks for;
        ``first`` keeps its call's first message (``request`` if it is the first)."""
        first[:] = first or [request]
        for fault in self._faults(APPEND_ROWS, nth, ("late_duplicate",)):
            copy = _standalone(first[0], request)
            late = _LateCopy(self, fault, copy, metadata)
            with self._lock:
                self._late.append(late)
            late.timer.start()

    def send_copy(self, fault: WireFault, copy: bytes, metadata: Any, after_s: float) -> None:
        """Send ``copy`` on a call of its own and record what the server answered."""
        assert self._channel is not None
        call = self._channel.stream_stream(SERVICE + APPEND_ROWS)
        try:
            answer = _answer(list(call(iter([copy]), metadata=metadata, timeout=30)))
        except grpc.RpcError as exc:
            answer = exc.code().name
        self._fire(fault, f"sent again {after_s:.1f} s later: {answer}")

    # -- forwarding ---------------------------------------------------------------

    def _metadata(self, context: grpc.ServicerContext) -> list[tuple[str, str | bytes]]:
        return [
            (key, value)
            for key, value in context.invocation_metadata()
            if not key.startswith(_HOP_BY_HOP)
        ]

    def unary(self, method: str, request: bytes, context: grpc.ServicerContext) -> bytes:
        assert self._channel is not None
        nth = self._next(method)
        before = self._faults(method, nth, ("delay", "unavailable", "uncommitted"))
        for fault in before:
            self._fire(fault)
            if fault.action == "delay":
                time.sleep(fault.delay_s)
            elif fault.action == "uncommitted":
                return b""  # a BatchCommitWriteStreamsResponse with no field set
            else:
                context.abort(grpc.StatusCode.UNAVAILABLE, _message(fault, "before forwarding"))
        call = self._channel.unary_unary(SERVICE + method)
        try:
            response: bytes = call(
                request, metadata=self._metadata(context), timeout=context.time_remaining()
            )
        except grpc.RpcError as exc:
            _pass_on(exc, context)
            raise  # unreachable: abort raised
        for fault in self._faults(method, nth, ("drop_response",)):
            self._fire(fault)
            context.abort(grpc.StatusCode.UNAVAILABLE, _message(fault, "after the server applied"))
        return response

    def append_rows(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        assert self._channel is not None
        with self._lock:
            self.open_append_calls += 1
        try:
            yield from self._append_rows(requests, context)
        finally:
            with self._lock:
                self.open_append_calls -= 1

    def _append_rows(
        self, requests: Iterator[bytes], context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        assert self._channel is not None
        abort: list[_AbortError] = []
        call_ready = threading.Event()
        upstream: dict[str, Any] = {}
        sent: list[int] = []  # global message numbers of this call, in order
        first: list[bytes] = []  # the call's first message: its stream and writer schema
        metadata = self._metadata(context)

        def forward() -> Iterator[bytes]:
            call_ready.wait()
            try:
                yield from forward_each()
            except grpc.RpcError:  # the client went away (killed, or it cancelled)
                return

        def forward_each() -> Iterator[bytes]:
            for request in requests:
                nth = self._next(APPEND_ROWS)
                for fault in self._faults(APPEND_ROWS, nth, ("delay", "unavailable")):
                    self._fire(fault)
                    if fault.action == "delay":
                        time.sleep(fault.delay_s)
                    else:
                        abort.append(_AbortError(grpc.StatusCode.UNAVAILABLE, _message(fault, "")))
                        upstream["call"].cancel()
                        return
                sent.append(nth)
                self._send_later(nth, first, request, metadata)
                yield self._gapped(nth, request)
                # gRPC asks for the next message only once this one is on the wire.
                for fault in self._faults(APPEND_ROWS, nth, ("cut",)):
                    self._fire(fault)
                    abort.append(_AbortError(grpc.StatusCode.UNAVAILABLE, _message(fault, "")))
                    upstream["call"].cancel()
                    return

        call = self._channel.stream_stream(SERVICE + APPEND_ROWS)(forward(), metadata=metadata)
        upstream["call"] = call
        call_ready.set()
        context.add_callback(call.cancel)  # the client went away: so does the upstream call
        answered = 0
        try:
            for response in call:
                if abort:
                    break
                nth = sent[answered] if answered < len(sent) else 0
                answered += 1
                for fault in self._faults(APPEND_ROWS, nth, ("kill",)):
                    # BigQuery applied the append; its sender dies before it hears so. Killed
                    # here, not once the message is on the wire: until its answer comes the
                    # sender waits, so its connection is still there to find it by (the
                    # last append of a stream could be answered, and the stream closed,
                    # before a kill after sending looked).
                    peer = context.peer()
                    detail = self.on_kill(peer, self.endpoint) if self.on_kill else "no callback"
                    self._fire(fault, detail)
                for fault in self._faults(APPEND_ROWS, nth, ("drop_response",)):
                    self._fire(fault)
                    call.cancel()
                    abort.append(_AbortError(grpc.StatusCode.UNAVAILABLE, _message(fault, "")))
                if abort:
                    break
                yield response
        except grpc.RpcError as exc:
            if not abort:
                _pass_on(exc, context)
        if abort:
            context.abort(abort[0].code, str(abort[0]))


class _LateCopy:
    """One ``late_duplicate`` copy: sent by its timer, or at once when the proxy stops."""

    def __init__(self, proxy: FaultProxy, fault: WireFault, copy: bytes, metadata: Any) -> None:
        self._once = threading.Lock()
        self._sent = False
        self._proxy = proxy
        self._fault = fault
        self._copy = copy
        self._metadata = metadata
        self._since = time.monotonic()
        self.timer = threading.Timer(fault.delay_s, self.send_now)
        self.timer.daemon = True

    def send_now(self) -> None:
        self.timer.cancel()
        with self._once:
            if not self._sent:
                self._sent = True
                after_s = time.monotonic() - self._since
                self._proxy.send_copy(self._fault, self._copy, self._metadata, after_s)


def _standalone(first: bytes, request: bytes) -> bytes:
    """``request`` able to open a call of its own: the stream name and writer schema of
    its call's ``first`` message put in when it has none (later messages of a call may
    leave them out)."""
    from google.cloud.bigquery_storage_v1 import types

    message = types.AppendRowsRequest.pb()()
    message.ParseFromString(request)
    opening = types.AppendRowsRequest.pb()()
    opening.ParseFromString(first)
    if not message.write_stream:
        message.write_stream = opening.write_stream
    for rows in ("proto_rows", "arrow_rows"):
        lacks_schema = message.HasField(rows) and not getattr(message, rows).HasField(
            "writer_schema"
        )
        if lacks_schema and opening.HasField(rows):
            getattr(message, rows).writer_schema.CopyFrom(getattr(opening, rows).writer_schema)
    standalone: bytes = message.SerializeToString()
    return standalone


def _answer(answers: Sequence[bytes]) -> str:
    """What an AppendRows call answered, in words: ``applied`` or the error's code."""
    from google.cloud.bigquery_storage_v1 import types

    if not answers:
        return "no answer"
    response = types.AppendRowsResponse.pb()()
    response.ParseFromString(answers[0])
    if response.HasField("error") and response.error.code:
        return f"error code {response.error.code}"
    return "applied"


def _with_gap(request: bytes) -> tuple[bytes, str]:
    """``request`` with its offset moved ``GAP_ROWS`` ahead, and what moved ("" if none)."""
    from google.cloud.bigquery_storage_v1 import types

    message = types.AppendRowsRequest.pb()()
    message.ParseFromString(request)
    if not message.HasField("offset"):
        return request, ""
    was = message.offset.value
    message.offset.value = was + GAP_ROWS
    return message.SerializeToString(), f"offset {was} sent as {was + GAP_ROWS}"


def _message(fault: WireFault, when: str) -> str:
    what = {
        "unavailable": "UNAVAILABLE injected before forwarding",
        "drop_response": "response dropped after the server applied the request",
        "delay": "delayed",
        "cut": "connection cut mid-stream",
        "kill": "client killed",
        "gap": "offset moved past the end of the stream",
        "late_duplicate": "sent again late",
    }[fault.action]
    return f"onceover chaos proxy: {what} ({fault.method} #{fault.nth}{' ' + when if when else ''})"


def _pass_on(exc: grpc.RpcError, context: grpc.ServicerContext) -> None:
    """End the client's call with the upstream's status, details and trailers."""
    call: Any = exc  # a grpc.Call as well as an RpcError
    trailers = call.trailing_metadata() or ()
    # grpc-status-details-bin (BigQuery's StorageError) is kept: the sink reads it.
    context.set_trailing_metadata(
        [(k, v) for k, v in trailers if k not in ("grpc-status", "grpc-message")]
    )
    context.abort(call.code(), call.details() or "")


class _Handler(grpc.GenericRpcHandler):  # type: ignore[misc]  # grpc ships no types
    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        full: str = details.method
        if not full.startswith(SERVICE):
            return None
        method = full.removeprefix(SERVICE)
        if method == APPEND_ROWS:
            return grpc.stream_stream_rpc_method_handler(self.proxy.append_rows)
        return grpc.unary_unary_rpc_method_handler(
            lambda request, context: self.proxy.unary(method, request, context)
        )
