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

How BigQuery's answers to a flush are read, as Apache Beam's
``StorageApiFlushAndFinalizeDoFn`` reads them (PR #35051 for the last), and what the
ledger then knows (docs/sink.md, "FlushRows"):

- OK, or ALREADY_EXISTS (``OFFSET_ALREADY_EXISTS``): flushed to there; the slot says so.
- INVALID_ARGUMENT, or any code with ``STREAM_FINALIZED``: the stream was finalized and
  flushes no more (Beam: "Implies that the stream has already been finalized"). Done if
  the ledger's slot records this batch flushed on it already; else
  :class:`~onceover_jobs.sink.errors.StreamFinalizedError`.
- OUT_OF_RANGE "is beyond the end of the stream" (``OFFSET_OUT_OF_RANGE``): the stream
  holds fewer rows than the ledger recorded (Beam: a truncated stream, its rows retried
  elsewhere); :class:`~onceover_jobs.sink.errors.StreamTruncatedError`.
- NOT_FOUND and the other missing-stream shapes:
  :class:`~onceover_jobs.sink.errors.StreamsGoneError`.

A stream gone is settled by the mode (:mod:`onceover_jobs.sink.modes.buffered`): the
batch written again when no flush of it was ever asked for, else named unresolvable. A
stream finalized or truncated under the sink (Onceover never finalizes a BUFFERED stream,
and BigQuery deletes an idle one rather than finalizing it: only another client can)
stops the batch, named: nothing is published blind, and nothing written twice.

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
from onceover_jobs.sink.errors import (
    CallRejectedError,
    CommitRejectedError,
    StreamFinalizedError,
    StreamsGoneError,
    StreamTruncatedError,
)
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
    flushed_before: Callable[[StreamCommit], bool] = lambda stream: False,
) -> None:
    """Flush every stream of a batch to its last row (streams without rows: nothing),
    calling ``then`` with each stream once it is flushed. ``flushed_before``: whether the
    ledger records the stream flushed for this batch already (a finalized stream is then
    done, not lost).

    Raises :class:`~onceover_jobs.sink.errors.StreamsUncommittableError` (gone, finalized,
    truncated) for a stream BigQuery can never flush (after the flushes under way have
    ended)."""

    def flush(stream: StreamCommit) -> None:
        last = stream.base + stream.rows - 1
        try:
            flush_stream(client, policy, stream.stream, last, label=label)
        except StreamFinalizedError:
            if not flushed_before(stream):
                raise
            logger.info("%s: %s was finalized after the ledger saw it flushed to offset %d",
                        label, stream.stream, last)  # fmt: skip
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
        if exc.grpc_code == "ALREADY_EXISTS" or exc.storage_code == "OFFSET_ALREADY_EXISTS":
            # Flushed this far before: an earlier try whose answer was lost, or the
            # driver that wrote the intent.
            logger.info("%s: %s already flushed to offset %d", label, stream, last)
            return
        if exc.storage_code == "STREAM_FINALIZED" or exc.grpc_code == "INVALID_ARGUMENT":
            raise StreamFinalizedError(
                f"{label}: {stream} was finalized, and BigQuery flushes nothing more of it "
                f"({exc.grpc_code}: {exc.server_message}): its rows past its last flush, "
                f"up to offset {last}, are never visible"
            ) from exc
        if exc.grpc_code == "OUT_OF_RANGE" or exc.storage_code == "OFFSET_OUT_OF_RANGE":
            raise StreamTruncatedError(
                f"{label}: {stream} holds fewer rows than the ledger recorded for it (a flush "
                f"to offset {last} is past its end: {exc.server_message}); the rows a task "
                "reported acknowledged are not in the stream"
            ) from exc
        raise
    if answered < last:
        raise CommitRejectedError(
            f"{label}: FlushRows on {stream} to offset {last} answered offset {answered}"
        )
