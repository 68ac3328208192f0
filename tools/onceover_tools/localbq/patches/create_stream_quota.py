"""``create_stream_quota``: CreateWriteStream is refused over the project's quota.

bqemulator created any number of streams. BigQuery ("Storage Write API quotas and
limits": *CreateWriteStream requests*) lets a project create 10,000 streams per hour per
region; over it CreateWriteStream fails with RESOURCE_EXHAUSTED ("Exceeds
'CreateWriteStream requests' quota, user_id: ... Entity: <table>"). The ``_default``
stream is never created, so never counted. The patch counts each CreateWriteStream call a
project makes over a rolling window (``create_streams_per_window`` per
``create_window_s`` of :mod:`onceover_tools.localbq.limits`; refused calls are not
counted) and refuses the next one with RESOURCE_EXHAUSTED: "Exceeds quota limit
'CreateWriteStream requests' of 10000 streams per hour per project per region, user_id:
<project> (status: INSUFFICIENT_TOKENS) ... Entity: <table>".
``limits.create_stream_calls(project)`` reads the count. The client library retries
RESOURCE_EXHAUSTED on CreateWriteStream for up to 20 minutes by default.

Pinned by ``tests/localbq/test_limits.py``:
``test_create_write_stream_over_the_quota_is_resource_exhausted_naming_it``,
``test_the_create_quota_is_a_rolling_window``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from onceover_tools.localbq import limits
from onceover_tools.localbq.limits import HOUR_S
from onceover_tools.localbq.patches.wrapping import wrap


def _quota_window(seconds: float) -> str:
    named = {HOUR_S: "hour", 60.0: "minute", 1.0: "second"}
    return named.get(seconds, f"{seconds:g} seconds")


def _table_parent_project(parent: str) -> str | None:
    """The project of ``projects/{p}/datasets/{d}/tables/{t}``; ``None`` if malformed."""
    parts = parent.split("/")
    if len(parts) != 6 or parts[0] != "projects" or not parts[1]:
        return None
    return parts[1]


def apply() -> None:
    """Refuse CreateWriteStream over the project's quota (RESOURCE_EXHAUSTED)."""
    import grpc
    from bqemulator.grpc_api.write_servicer import BigQueryWriteHandler
    from google.cloud.bigquery_storage_v1 import types

    request_type = types.CreateWriteStreamRequest.pb()

    def make(original: Callable[..., bytes]) -> Callable[..., bytes]:
        def _handle_create_write_stream(handler: Any, request_bytes: bytes, context: Any) -> bytes:
            parent = request_type.FromString(request_bytes).parent
            project = _table_parent_project(parent)
            if project is None:  # bqemulator answers INVALID_ARGUMENT; nothing to count
                return original(handler, request_bytes, context)
            wait_s = limits.CREATE_STREAM_QUOTA.admit(project)
            if wait_s is not None:
                values = limits.WRITE_API_LIMITS.snapshot()
                window = _quota_window(values.create_window_s)
                context.set_code(grpc.StatusCode.RESOURCE_EXHAUSTED)
                context.set_details(
                    f"Exceeds quota limit 'CreateWriteStream requests' of "
                    f"{values.create_streams_per_window} streams per {window} per project "
                    f"per region, user_id: {project} (status: INSUFFICIENT_TOKENS); the "
                    f"oldest counted call leaves the window in {wait_s:.1f} s. Use the "
                    "_default stream where exactly-once is not needed, see "
                    "https://cloud.google.com/bigquery/docs/write-api-best-practices"
                    f"#limit_the_rate_of_stream_creation. Entity: {parent}"
                )
                return b""
            return original(handler, request_bytes, context)

        return _handle_create_write_stream

    wrap(BigQueryWriteHandler, "_handle_create_write_stream", make)
