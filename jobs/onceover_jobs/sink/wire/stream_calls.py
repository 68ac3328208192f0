"""The stream calls both sides make: a task when it finishes a stream or takes one up
again, the driver when it commits or settles a batch. In a module without pyarrow or
the client library, for the driver's commit worker (:mod:`onceover_jobs.sink.wire.write_api`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from onceover_jobs.sink import failpoints
from onceover_jobs.sink.wire.unary import CallNotFoundError, call_with_retry

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.retry import RetryPolicy
    from onceover_jobs.sink.wire.write_api import WriteApi


def finalize_stream(client: WriteApi, policy: RetryPolicy, stream: str) -> int:
    def finalize(timeout: float) -> int:
        row_count = client.finalize_write_stream(stream, timeout=timeout)
        if failpoints.hit("finalize.after"):
            from google.api_core.exceptions import ServiceUnavailable

            raise ServiceUnavailable("failpoint finalize.after: response lost")
        return row_count

    # Finalizing a finalized stream answers its row count again, so a lost response
    # is retried safely.
    return call_with_retry(policy, finalize, what="FinalizeWriteStream", on=stream)


def stream_exists(client: WriteApi, policy: RetryPolicy, stream: str) -> bool:
    """Whether BigQuery still knows ``stream`` (a BUFFERED stream idle 7 days is gone)."""
    try:
        call_with_retry(
            policy,
            lambda timeout: client.get_write_stream(stream, timeout=timeout),
            what="GetWriteStream",
            on=stream,
        )
    except CallNotFoundError:
        return False
    return True
