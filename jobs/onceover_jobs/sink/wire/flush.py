"""Buffered mode's commit: FlushRows on each stream of a batch, up to the batch's last row.

A BUFFERED stream holds appended rows out of sight until FlushRows; "rows before this
offset (including this offset) will be flushed" (``FlushRowsRequest.offset``), so a
batch whose rows sit at ``[base, base + rows)`` of a stream is flushed to
``base + rows - 1``. A flush makes every row up to its offset visible, which is why a
partition's next batch continues a stream only after this batch's flush
(:mod:`onceover_jobs.sink.ledger.slots`).

Flushing is idempotent in effect: flushing to an offset already flushed publishes
nothing again. BigQuery's answer to such a repeat is not documented; Apache Beam reads
ALREADY_EXISTS as "flushed up to there already", and the local BigQuery can answer
either way (``repeated_flush``). Both are taken as done, so a flush whose answer was lost
is simply asked again, and a replay that finds the batch's intent flushes all of its
streams again to finish one a crash interrupted.

The flushes of one batch are one call per stream, not one atomic call: between a crash
and the replay that finishes them, some partitions of the batch can be visible and the
others not yet (docs/guides/modes.md, "Which to choose"). The first stream is flushed alone
(the ``flush.between`` failpoint comes after it), the others side by side: a batch's
commit waits for about two calls, not one per partition.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from onceover.ledger_files import StreamCommit
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import CallRejectedError, CommitRejectedError, StreamsGoneError
from onceover_jobs.sink.wire.unary import CallNotFoundError, call_with_retry

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.retry import RetryPolicy
    from onceover_jobs.sink.wire.write_api import WriteApi

logger = logging.getLogger(__name__)

FLUSH_THREADS = 8
"""Streams of one batch flushed at once (each a unary call of a few milliseconds)."""


def flush_batch(
    client: WriteApi,
    policy: RetryPolicy,
    streams: Sequence[StreamCommit],
    *,
    label: str,
    then: Callable[[StreamCommit], None] = lambda stream: None,
) -> None:
    """Flush every stream of a batch to its last row (streams without rows: nothing),
    calling ``then`` with each stream once it is flushed.

    Raises :class:`~onceover_jobs.sink.errors.StreamsGoneError` when BigQuery no longer knows a
    stream, :class:`~onceover_jobs.sink.errors.CommitRejectedError` when it holds fewer rows
    than the ledger recorded (after the flushes under way have ended)."""

    def flush(stream: StreamCommit) -> None:
        flush_stream(client, policy, stream.stream, stream.base + stream.rows - 1, label=label)
        then(stream)

    with_rows = [s for s in streams if s.rows > 0]
    if not with_rows:
        return
    first, *rest = with_rows
    flush(first)
    if not rest:
        return
    failpoints.hit("flush.between")  # one partition visible, the others not yet
    with ThreadPoolExecutor(min(FLUSH_THREADS, len(rest)), "onceover-flush") as pool:
        for done in [pool.submit(flush, stream) for stream in rest]:
            done.result()


def flush_stream(
    client: WriteApi, policy: RetryPolicy, stream: str, last: int, *, label: str
) -> None:
    """Make the rows of ``stream`` up to and including offset ``last`` visible."""
    from google.api_core.exceptions import ServiceUnavailable

    def flush(timeout: float) -> int:
        answered = client.flush_rows(stream, last, timeout=timeout)
        if failpoints.hit("flush.after"):
            raise ServiceUnavailable("failpoint flush.after: response lost")
        return answered

    try:
        answered = call_with_retry(policy, flush, what="FlushRows", on=stream)
    except CallNotFoundError as exc:
        raise StreamsGoneError(f"{label}: {exc.message}") from exc
    except CallRejectedError as exc:
        if exc.grpc_code == "ALREADY_EXISTS":
            # Flushed this far before: an earlier try whose answer was lost, or the
            # driver that wrote the intent.
            logger.info("%s: %s already flushed to offset %d", label, stream, last)
            return
        if exc.grpc_code == "OUT_OF_RANGE":
            raise CommitRejectedError(
                f"{label}: {stream} holds fewer rows than the ledger recorded for it (a flush "
                f"to offset {last} is past its end: {exc.server_message}); the rows a task "
                "reported acknowledged are not in the stream. Nothing more of the batch was "
                "flushed"
            ) from exc
        raise
    if answered < last:
        raise CommitRejectedError(
            f"{label}: FlushRows on {stream} to offset {last} answered offset {answered}"
        )
