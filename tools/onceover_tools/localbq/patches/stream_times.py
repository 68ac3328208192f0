"""``stream_times``: ``GetWriteStream`` answers a stream's real times.

``GetWriteStream`` reported ``create_time`` = now and never ``commit_time``. BigQuery
(``WriteStream`` reference): ``create_time`` is when the stream was created (for
``_default``, the table's creation time); ``commit_time`` is set once a PENDING stream is
committed and equals ``create_time`` for COMMITTED streams; empty ``commit_time`` on a
PENDING stream means not committed. The sink's ledger uses ``commit_time`` to resolve an
intent after a crash.

Pinned by ``tests/localbq/test_patches.py``:
``test_get_write_stream_reports_create_time_and_commit_time_of_a_pending_stream``,
``test_a_committed_stream_has_commit_time_equal_to_create_time``,
``test_the_default_stream_was_created_with_its_table``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


@dataclass
class _StreamTimes:
    create_time: Any  # google.protobuf.Timestamp
    commit_time: Any = None


def _times(handler: Any) -> dict[str, _StreamTimes]:
    """Per-server record of stream times (stream state is in memory in bqemulator too)."""
    times: dict[str, _StreamTimes] = handler.__dict__.setdefault("_onceover_stream_times", {})
    return times


def apply() -> None:
    """Give ``GetWriteStream`` the real ``create_time`` and ``commit_time``."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamType
    from google.cloud.bigquery_storage_v1 import types
    from google.protobuf.timestamp_pb2 import Timestamp

    def make_create(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_create_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            if response_bytes:
                stream = types.WriteStream.deserialize(response_bytes)
                created = Timestamp()
                created.CopyFrom(types.WriteStream.pb(stream).create_time)
                _times(handler)[stream.name] = _StreamTimes(create_time=created)
            return response_bytes

        return _handle_create_write_stream

    def make_get(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_get_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            if not response_bytes:
                return response_bytes
            response = types.WriteStream.pb(types.WriteStream.deserialize(response_bytes))
            stream = handler.manager.get(response.name)
            if stream is None:
                return response_bytes
            if stream.stream_type is WriteStreamType.DEFAULT:
                table = handler._ctx.catalog.get_table(
                    stream.project_id, stream.dataset_id, stream.table_id
                )
                if table is not None:
                    response.create_time.FromDatetime(table.creation_time)
                response.commit_time.CopyFrom(response.create_time)
            else:
                recorded = _times(handler).get(stream.name)
                if recorded is not None:
                    response.create_time.CopyFrom(recorded.create_time)
                if stream.stream_type is WriteStreamType.COMMITTED:
                    response.commit_time.CopyFrom(response.create_time)
                elif recorded is not None and recorded.commit_time is not None:
                    response.commit_time.CopyFrom(recorded.commit_time)
            return bytes(response.SerializeToString())

        return _handle_get_write_stream

    def make_commit(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            response = types.BatchCommitWriteStreamsResponse.pb(
                types.BatchCommitWriteStreamsResponse.deserialize(response_bytes)
            )
            if response.HasField("commit_time") and not response.stream_errors:
                request = types.BatchCommitWriteStreamsRequest.deserialize(request_bytes)
                times = _times(handler)
                for name in request.write_streams:
                    if name in times:
                        committed = Timestamp()
                        committed.CopyFrom(response.commit_time)
                        times[name].commit_time = committed
            return response_bytes

        return _handle_batch_commit_write_streams

    wrap(BigQueryWriteHandler, "_handle_create_write_stream", make_create)
    wrap(BigQueryWriteHandler, "_handle_get_write_stream", make_get)
    wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make_commit)
