"""``commit_stream_limit``: one BatchCommitWriteStreams commits at most so many streams.

bqemulator committed any number of streams at once. BigQuery ("Storage Write API quotas
and limits": streams per ``BatchCommitWriteStreams``) commits at most 10,000 streams in
one call. The patch refuses a call naming more than ``commit_max_streams`` (of
:mod:`onceover_tools.localbq.limits`) with INVALID_ARGUMENT before looking at any stream:
nothing is committed.

Pinned by ``tests/localbq/test_limits.py``:
``test_a_batch_commit_of_more_streams_than_the_limit_commits_nothing``,
``test_by_default_one_batch_commit_takes_at_most_10000_streams``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.patches.wrapping import wrap


def apply() -> None:
    """Refuse a BatchCommitWriteStreams naming too many streams (INVALID_ARGUMENT)."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.BatchCommitWriteStreamsRequest.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_batch_commit_write_streams(
            handler: Any, request_bytes: bytes, context: Any
        ) -> bytes:
            request = request_type.FromString(request_bytes)
            most = limits.WRITE_API_LIMITS.commit_max_streams
            if len(request.write_streams) > most:
                context.set_code(grpc.StatusCode.INVALID_ARGUMENT)
                context.set_details(
                    f"BatchCommitWriteStreams names {len(request.write_streams)} streams; "
                    f"at most {most} streams can be committed in one call. "
                    f"Entity: {request.parent}"
                )
                return b""
            return original(handler, request_bytes, context)

        return _handle_batch_commit_write_streams

    wrap(BigQueryWriteHandler, "_handle_batch_commit_write_streams", make)
