"""``stream_lifetimes``: streams expire as BigQuery's do.

bqemulator's streams never expired. In BigQuery a PENDING stream that is not committed
within 24 hours of its creation is deleted, and so is a COMMITTED stream that has had no
append for 3 days (a BUFFERED one: 7 days); whoever uses it afterwards is told it does not
exist. The patch notes when each stream is created and last appended to (a successful
append) and deletes it from bqemulator's stream manager the first time it is looked up
after ``pending_lifetime_s`` (not committed) or ``committed_idle_s`` /
``buffered_idle_s`` (idle; all three of :mod:`onceover_tools.localbq.limits`):
GetWriteStream, FinalizeWriteStream, FlushRows and a new AppendRows connection then answer
NOT_FOUND, BatchCommitWriteStreams lists it with ``STREAM_NOT_FOUND`` and commits nothing,
and an AppendRows connection already open on it answers each request with an in-stream
NOT_FOUND. Rows a COMMITTED stream appended stay in the table; a committed PENDING stream
is kept (its ``commit_time`` is how a writer learns the commit happened); ``_default``
never expires.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_pending_stream_not_committed_within_its_lifetime_is_deleted``,
``test_appending_does_not_extend_a_pending_streams_lifetime``,
``test_an_idle_stream_is_deleted_and_its_committed_rows_stay``,
``test_appends_keep_a_committed_stream_alive``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap

logger = logging.getLogger(__name__)


@dataclass
class _StreamClock:
    created: float  # time.monotonic()
    last_append: float


def _clocks(manager: Any) -> dict[str, _StreamClock]:
    """Per-manager record of when each stream was created and last appended to."""
    clocks: dict[str, _StreamClock] = manager.__dict__.setdefault("_onceover_stream_clocks", {})
    return clocks


def _lifetime_over(stream: Any, clock: _StreamClock, now: float) -> bool:
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType

    values = limits.WRITE_API_LIMITS.snapshot()
    if stream.stream_type is WriteStreamType.PENDING:
        # A committed PENDING stream stays: its commit_time tells a writer it happened.
        return (
            stream.state is not WriteStreamState.COMMITTED
            and now - clock.created > values.pending_lifetime_s
        )
    if stream.stream_type is WriteStreamType.COMMITTED:
        return now - clock.last_append > values.committed_idle_s
    if stream.stream_type is WriteStreamType.BUFFERED:
        return now - clock.last_append > values.buffered_idle_s
    return False  # the _default stream lives as long as its table


def _expired(manager: Any, stream: Any, delete: Callable[[Any, str], None]) -> bool:
    """Delete ``stream`` if its lifetime is over; say whether it was."""
    clock = _clocks(manager).get(stream.name)
    if clock is None or not _lifetime_over(stream, clock, time.monotonic()):
        return False
    delete(manager, stream.name)
    _clocks(manager).pop(stream.name, None)
    logger.info("local BigQuery: write stream %s expired and was deleted", stream.name)
    return True


def apply() -> None:
    """Delete PENDING streams not committed in time and idle COMMITTED/BUFFERED streams."""
    import grpc
    from bqemulator.grpc_api import write_servicer
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamManager
    from google.cloud.bigquery_storage_v1 import types

    response_type = types.AppendRowsResponse.pb()
    delete = WriteStreamManager.delete

    def make_create(original: Callable[..., Any]) -> Callable[..., Any]:
        def create(manager: Any, *args: Any, **kwargs: Any) -> Any:
            stream = original(manager, *args, **kwargs)
            now = time.monotonic()
            _clocks(manager)[stream.name] = _StreamClock(created=now, last_append=now)
            return stream

        return create

    def make_get(original: Callable[..., Any]) -> Callable[..., Any]:
        # Every RPC finds its stream here: Get, Finalize, Flush, AppendRows (binding a
        # connection) and BatchCommit's validation all answer "not found" once it is gone.
        def get(manager: Any, name: str) -> Any:
            stream = original(manager, name)
            if stream is not None and _expired(manager, stream, delete):
                return None
            return stream

        return get

    def make_list_active(original: Callable[..., Any]) -> Callable[..., Any]:
        def list_active(manager: Any) -> tuple[Any, ...]:
            return tuple(s for s in original(manager) if not _expired(manager, s, delete))

        return list_active

    def make_append(original: Callable[..., bytes]) -> Callable[..., bytes]:
        # A connection bound to a stream does not look it up again: check it here.
        def _perform_append(handler: Any, bound_stream: Any, *args: Any, **kwargs: Any) -> bytes:
            if handler.manager.get(bound_stream.name) is not bound_stream:
                return bytes(
                    write_servicer._error_response(
                        bound_stream.name,
                        f"Requested entity was not found. Entity: {bound_stream.name}",
                        status_code=grpc.StatusCode.NOT_FOUND,
                    )
                )
            response = original(handler, bound_stream, *args, **kwargs)
            clock = _clocks(handler.manager).get(bound_stream.name)
            if clock is not None and not response_type.FromString(response).HasField("error"):
                clock.last_append = time.monotonic()
            return response

        return _perform_append

    wrap(WriteStreamManager, "create", make_create)
    wrap(WriteStreamManager, "get", make_get)
    wrap(WriteStreamManager, "list_active", make_list_active)
    wrap(BigQueryWriteHandler, "_perform_append", make_append)
