"""The sink's Storage Write API client: raw gRPC on one channel a process keeps.

Two costs every write paid are gone from here (docs/journal/profiling.md, "Writers"):

- **imports.** The unary calls (create, get, finalize, flush, batch commit) go as raw
  gRPC requests in protobuf's wire format (:mod:`onceover_jobs.sink.wire.messages`), not
  through google-cloud-bigquery-storage's generated client, whose import took seconds
  in every fresh Python worker and pulls pandas in wherever it is installed. The
  driver's commit imports nothing of that library; appends (:meth:`WriteApi.append_rows`)
  still use its message classes, in the tasks, whose workers preload them
  (:mod:`onceover_jobs.worker_daemon`).
- **a channel per task.** Spark reuses a Python worker for many tasks and commits, so
  :func:`write_api` keeps one channel per process and configuration: a task's first
  call no longer waits for a TCP and HTTP/2 handshake (and, against real BigQuery, TLS
  and a token).

A kept channel must not outlive a dead connection: gRPC reconnects a channel by itself,
but after failed attempts it waits longer and longer (up to two minutes) before the
next, and every call meanwhile fails at once. So a call that finds the connection
broken (UNAVAILABLE, or a transport failure) replaces the channel before it raises:
the caller's retry (:mod:`onceover_jobs.sink.wire.unary`, the appender's reconnect) and every
later task go to a fresh one, as a new task's own client did before.

Calls take ``timeout=`` (seconds) and raise ``grpc.RpcError``, which
:func:`onceover_jobs.sink.wire.unary.call_with_retry` classifies and retries.
"""

from __future__ import annotations

import os
import platform
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import grpc

from onceover import __version__
from onceover_jobs.sink.wire import messages as write_wire
from onceover_jobs.sink.wire.messages import CommitAnswer, StreamFacts
from onceover_jobs.sink.wire.retry import is_retried

if TYPE_CHECKING:
    from onceover.bigquery import BigQueryConfig

SERVICE = "google.cloud.bigquery.storage.v1.BigQueryWrite"

_API_CLIENT = (
    f"onceover/{__version__} gl-python/{platform.python_version()} grpc/{grpc.__version__}"
)
"""``x-goog-api-client``: who calls, as Google's client libraries say it."""


def _routing(key: str, value: str) -> tuple[str, str]:
    """The request's routing header, which BigQuery routes by (the client library sends
    the same: the resource the call is on, URL-encoded)."""
    return ("x-goog-request-params", urlencode([(key, value)], safe="/"))


class WriteApi:
    """The Storage Write API calls of the sink, on a channel made by ``open_channel``
    (and made again when a call finds its connection broken)."""

    def __init__(self, open_channel: Callable[[], grpc.Channel]) -> None:
        self._open_channel = open_channel
        self._lock = threading.Lock()
        self._channel = open_channel()
        self._calls: dict[str, Any] = {}

    # -- the channel -------------------------------------------------------------------

    @property
    def channel(self) -> grpc.Channel:
        return self._channel

    def renew(self, broken: grpc.Channel) -> None:
        """Replace ``broken`` (unless another thread did already) with a fresh channel.
        Calls still open on the old one run to their end; it closes once they are gone."""
        with self._lock:
            if self._channel is broken:
                self._channel = self._open_channel()
                self._calls = {}

    def _unary(self, method: str) -> tuple[grpc.Channel, Any]:
        with self._lock:
            channel = self._channel
            call = self._calls.get(method)
            if call is None:
                # Bytes in, bytes out: the messages are write_wire's.
                call = channel.unary_unary(f"/{SERVICE}/{method}")
                self._calls[method] = call
        return channel, call

    def _call(self, method: str, request: bytes, routing: tuple[str, str], timeout: float) -> bytes:
        channel, call = self._unary(method)
        try:
            answer: bytes = call(
                request, timeout=timeout, metadata=(routing, ("x-goog-api-client", _API_CLIENT))
            )
        except grpc.RpcError as exc:
            if connection_broken(exc):
                self.renew(channel)
            raise
        return answer

    # -- unary calls -------------------------------------------------------------------

    def create_write_stream(self, parent: str, stream_type: str, *, timeout: float) -> StreamFacts:
        """A new stream of ``stream_type`` (``PENDING``, ``BUFFERED``, ``COMMITTED``)."""
        request = write_wire.create_write_stream_request(parent, stream_type)
        answer = self._call("CreateWriteStream", request, _routing("parent", parent), timeout)
        return write_wire.write_stream(answer)

    def get_write_stream(self, name: str, *, timeout: float) -> StreamFacts:
        request = write_wire.get_write_stream_request(name)
        answer = self._call("GetWriteStream", request, _routing("name", name), timeout)
        return write_wire.write_stream(answer)

    def finalize_write_stream(self, name: str, *, timeout: float) -> int:
        """Finalize ``name``; returns its row count (the same again for a finalized one)."""
        request = write_wire.finalize_write_stream_request(name)
        answer = self._call("FinalizeWriteStream", request, _routing("name", name), timeout)
        return write_wire.row_count(answer)

    def flush_rows(self, stream: str, offset: int, *, timeout: float) -> int:
        """Flush a BUFFERED stream up to and including ``offset``; returns the offset
        BigQuery says it flushed to."""
        request = write_wire.flush_rows_request(stream, offset)
        answer = self._call("FlushRows", request, _routing("write_stream", stream), timeout)
        return write_wire.flushed_offset(answer)

    def batch_commit_write_streams(
        self, parent: str, streams: Sequence[str], *, timeout: float
    ) -> CommitAnswer:
        request = write_wire.batch_commit_request(parent, streams)
        route = _routing("parent", parent)
        return write_wire.commit_answer(
            self._call("BatchCommitWriteStreams", request, route, timeout)
        )

    # -- appends -----------------------------------------------------------------------

    def append_rows(self, requests: Iterator[Any], *, metadata: Sequence[tuple[str, str]]) -> Any:
        """Open an ``AppendRows`` call on the current channel: it sends ``requests``
        (``AppendRowsRequest`` of the client library's types) and yields the responses."""
        from google.cloud.bigquery_storage_v1 import types

        with self._lock:
            channel = self._channel
            call = self._calls.get("AppendRows")
            if call is None:
                call = channel.stream_stream(
                    f"/{SERVICE}/AppendRows",
                    request_serializer=types.AppendRowsRequest.serialize,
                    response_deserializer=types.AppendRowsResponse.deserialize,
                )
                self._calls["AppendRows"] = call
        return call(requests, metadata=(*metadata, ("x-goog-api-client", _API_CLIENT)))


def connection_broken(exc: grpc.RpcError) -> bool:
    """Whether a failed call says its connection is broken (no server answered), as
    opposed to an answer from BigQuery: UNAVAILABLE, or a transport failure."""
    status = exc.code() if callable(getattr(exc, "code", None)) else None
    details = exc.details() if callable(getattr(exc, "details", None)) else None
    if status == grpc.StatusCode.UNAVAILABLE:
        return True
    code = status.value[0] if isinstance(status, grpc.StatusCode) else -1
    return code == grpc.StatusCode.UNKNOWN.value[0] and is_retried(code, str(details or ""))


_clients: dict[tuple[int, BigQueryConfig], WriteApi] = {}
_clients_lock = threading.Lock()


def write_api(config: BigQueryConfig) -> WriteApi:
    """This process's client for ``config``: made on the first call, kept after. Keyed by
    the process too, so a forked child never uses its parent's channel (gRPC channels do
    not survive a fork)."""
    from onceover.bigquery import write_channel

    key = (os.getpid(), config)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = WriteApi(lambda: write_channel(config))
            _clients[key] = client
    return client
