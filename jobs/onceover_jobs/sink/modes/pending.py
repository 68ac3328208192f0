"""``pending``: transactional. Each task attempt writes a PENDING stream of its own; the
driver commits all of a batch's streams with one ``BatchCommitWriteStreams``, so the
batch becomes visible at once or not at all (atomic per table).

- A task appends with offsets, finalizes, checks ``row_count`` and returns its stream.
  Nothing is visible yet. A failed or speculative attempt's stream is never committed
  (the driver commits only what Spark accepted): an orphan, reported as one.
- Before the intent, the batch is held against one commit's limits (10,000 streams,
  1 TB pending in a region): a batch over them could be written and never committed.
- A replay that finds the intent asks BigQuery each stream's ``commit_time``: all set,
  the batch is committed; none, the intent's own streams are committed (never the
  replay's, so a driver that still runs and commits the same streams gets
  ``STREAM_ALREADY_COMMITTED``); streams BigQuery no longer knows are written again,
  unless a commit of them was ever asked for (then only the table can tell).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from onceover.ledger_files import BatchRecord, StreamCommit
from onceover.modes import TRAITS
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import (
    IntentUnresolvableError,
    PendingBufferError,
    RowCountMismatchError,
    StreamsGoneError,
    StreamsUncommittableError,
)
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.modes.base import CommitContext, WriteMode
from onceover_jobs.sink.wire.batch_commit import batch_commit, commit_time
from onceover_jobs.sink.wire.commit_limits import (
    check_buffer_age,
    check_bytes,
    check_partition,
    check_streams,
    expired_streams,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from onceover_jobs.sink.job.sink_job import SinkJob
    from onceover_jobs.sink.modes.staging import Stage

logger = logging.getLogger(__name__)


class PendingMode(WriteMode):
    traits = TRAITS["pending"]

    def write(self, stage: Stage, batches: Iterator[pa.RecordBatch]) -> TaskResult:
        from onceover_jobs.sink.modes.staging import chained, encoder_for

        job, task, kind = stage.job, stage.task, self.traits.stream_type
        first = next(batches, None)
        if first is None:  # an empty partition makes no stream
            return TaskResult(None, kind, 0, 0, task.partition, task.attempt)
        check_partition(job.table, task.partition)  # before a stream: one commit takes 10,000
        stream = stage.create_stream(kind)
        events = stage.events(stream, kind)
        events.created()
        encoder = encoder_for(job)
        refusals = stage.refusals(encoder, events)
        appender = stage.appender(stream, encoder=encoder, events=events, refusals=refusals)
        try:
            rows = stage.append_all(appender, chained(first, batches), encoder, offsets=True)
            rows -= appender.rows_refused
            appender.close()
            row_count = stage.finalize(stream)
            finalized_at = datetime.now(UTC).isoformat()  # BigQuery's 4 hours start here
            dead_letters = stage.dead_letters(refusals)
        except BaseException as exc:
            appender.close()
            # Never committed by anyone: the driver only commits streams tasks return.
            events.orphaned(f"task attempt failed: {exc!r}"[:4000], appender.rows_acknowledged)
            raise
        events.finalized(row_count)
        if row_count != rows:
            events.orphaned(f"finalized with {row_count} rows, {rows} were appended", row_count)
            raise RowCountMismatchError(
                f"{stage.label}: stream {stream} finalized with {row_count} rows but {rows} "
                "were appended"
            )
        return TaskResult(
            stream, kind, rows, appender.bytes_acknowledged, task.partition, task.attempt,
            dead_letters=dead_letters, finalized_at=finalized_at,
        )  # fmt: skip

    def prepare(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> None:
        """One commit's limits, before an intent: a batch over them is never written."""
        job = ctx.job
        check_streams(ctx.label, job.table, len(streams))
        check_buffer_age(ctx.label, job.table, streams)
        check_bytes(
            ctx.label, job.table, sum(s.bytes for s in streams), lambda: _dataset_location(job)
        )

    def publish(self, ctx: CommitContext, intent: BatchRecord) -> str | None:
        failpoints.hit("commit.before")
        return _commit(ctx, intent)

    def settle_streams(
        self, ctx: CommitContext, record: BatchRecord, replay: Sequence[StreamCommit]
    ) -> BatchRecord:
        try:
            ctx.commit_dead_letters(record, resolving=True)
            committed_at = commit_time(
                ctx.client, ctx.job.retry_policy, [s.stream for s in record.streams],
                label=ctx.label,
            )  # fmt: skip
            if committed_at is None and (old := expired_streams(record.streams)):
                # Not committed, and BigQuery may no longer hold their rows: committing
                # them could publish a batch with rows missing and say it succeeded.
                return ctx.write_again(record, PendingBufferError(
                    f"{len(old)} of the intent's streams were finalized over "
                    f"{max(age for _, age in old) / 3600:.1f} h ago, past the 4 hours "
                    "BigQuery keeps their rows for a commit"
                ), replay)  # fmt: skip
            if committed_at is None:
                # Commit the intent's own streams, never the replay's: if the driver that
                # wrote it still runs (an orchestrator's retry, a resume of a run that
                # only looked stalled), its commit of the same streams then answers
                # STREAM_ALREADY_COMMITTED, and the batch is in BigQuery once.
                logger.warning(
                    "%s: intent of %s, not committed in BigQuery: committing its streams",
                    ctx.label,
                    record.owner or "an earlier driver",
                )
                record = ctx.commit_started(record)
                committed_at = _commit(ctx, record)
        except StreamsGoneError as exc:
            if record.commit_started_at is not None:
                # Expired uncommitted, or committed and forgotten since: only the
                # table can tell, and writing the batch again could repeat it.
                raise IntentUnresolvableError(ctx.unresolvable(record, exc)) from exc
            return ctx.write_again(record, exc)
        except StreamsUncommittableError as exc:
            return ctx.write_again(record, exc)
        settled = ctx.settled(record, commit_time=committed_at)
        logger.warning("%s: settled from the intent an earlier attempt left", ctx.label)
        return settled

    def aborted(self, ctx: CommitContext, streams: Sequence[StreamCommit]) -> str:
        for stream in streams:
            ctx.orphaned(stream, "batch aborted; never committed")
        return "aborted before commit; its streams were never committed"


def _commit(ctx: CommitContext, record: BatchRecord) -> str | None:
    return batch_commit(
        ctx.client,
        ctx.job.retry_policy,
        ctx.job.parent,
        [s.stream for s in record.streams],
        table=ctx.job.table,
        label=ctx.label,
    )


def _dataset_location(job: SinkJob) -> str | None:
    """The location of the table's dataset, as BigQuery reports it."""
    from onceover.bigquery import bigquery_client

    client = bigquery_client(job.bigquery)
    try:
        location = client.get_dataset(job.table.rsplit(".", 1)[0]).location
    finally:
        client.close()
    return None if location is None else str(location)
