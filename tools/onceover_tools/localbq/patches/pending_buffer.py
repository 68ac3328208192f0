"""``pending_buffer``: a finalized PENDING stream's rows are kept 4 hours for a commit.

BigQuery ("Batch load data using the Storage Write API"): "After the stream is finalized
and before it is committed, the data can remain in the buffer for up to 4 hours. Pending
streams must be committed within 24 hours." bqemulator kept a finalized stream's rows
until its commit, however late. The patch notes when each PENDING stream is finalized and,
when a BatchCommitWriteStreams names one finalized longer ago than ``pending_buffer_s``
(:mod:`onceover_tools.localbq.limits`, 4 hours; shortened by tests), drops its rows before
the commit runs. BigQuery documents no answer for that commit, so the patch gives the one
a caller must guard against: the commit succeeds, with a commit time, and the stream's
rows are not in the table (the sink never commits such a stream: see
``onceover_jobs.sink.wire.commit_limits``).

Pinned by ``tests/localbq/test_limits.py``:
``test_a_finalized_pending_streams_rows_are_dropped_after_the_buffer_time``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap

_finalized: dict[str, float] = {}
"""When each PENDING stream was finalized (monotonic), by name."""
_lock = threading.Lock()


def apply() -> None:
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState, WriteStreamType
    from google.cloud.bigquery_storage_v1 import types

    def make_finalize(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def handle(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            response = original(handler, request_bytes, context)
            name = types.FinalizeWriteStreamRequest.pb().FromString(request_bytes).name
            stream = handler.manager.get(name)
            if (
                stream is not None
                and stream.stream_type is WriteStreamType.PENDING
                and stream.state is WriteStreamState.FINALIZED
            ):
                with _lock:
                    _finalized.setdefault(name, time.monotonic())  # the first finalize
            return response

        return handle

    def make_commit(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def handle(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            names = types.BatchCommitWriteStreamsRequest.pb().FromString(request_bytes)
            kept_for = limits.WRITE_API_LIMITS.pending_buffer_s
            now = time.monotonic()
            for name in names.write_streams:
                stream = handler.manager.get(name)
                with _lock:
                    finalized = _finalized.get(name)
                if (
                    stream is not None
                    and finalized is not None
                    and stream.state is WriteStreamState.FINALIZED
                    and now - finalized > kept_for
                ):
                    with stream.lock:
                        stream.buffer.clear()  # its rows are gone; the stream is not
            response = original(handler, request_bytes, context)
            with _lock:
                for name in names.write_streams:
                    stream = handler.manager.get(name)
                    if stream is None or stream.state is WriteStreamState.COMMITTED:
                        _finalized.pop(name, None)
            return response

        return handle

    wrap(BigQueryWriteHandler, "_handle_finalize_write_stream", make_finalize)
    wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make_commit)
