"""``stream_already_committed``: re-committing answers ``STREAM_ALREADY_COMMITTED``.

``BatchCommitWriteStreams`` on a stream that is already committed answered
``INVALID_STREAM_STATE``; BigQuery answers ``STREAM_ALREADY_COMMITTED``
(``StorageError.StorageErrorCode``), which the sink reads as "this commit already
happened".

Pinned by ``tests/localbq/test_patches.py``:
``test_committing_a_committed_stream_again_answers_stream_already_committed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Answer ``STREAM_ALREADY_COMMITTED`` when a committed stream is committed again."""
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from bqemulator.streaming.write_stream import WriteStreamState
    from google.cloud.bigquery_storage_v1 import types

    codes = types.StorageError.StorageErrorCode

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            response_bytes = original(handler, request_bytes, context)
            response = types.BatchCommitWriteStreamsResponse.pb(
                types.BatchCommitWriteStreamsResponse.deserialize(response_bytes)
            )
            changed = False
            for error in response.stream_errors:
                stream = handler.manager.get(error.entity)
                if (
                    error.code == codes.INVALID_STREAM_STATE
                    and stream is not None
                    and stream.state is WriteStreamState.COMMITTED
                ):
                    error.code = codes.STREAM_ALREADY_COMMITTED
                    error.error_message = f"Stream already committed: {error.entity}"
                    changed = True
            return bytes(response.SerializeToString()) if changed else response_bytes

        return _handle_batch_commit_write_streams

    wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make)
