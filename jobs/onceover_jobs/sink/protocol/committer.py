"""The driver's side of the two-phase commit: the ledger, then BigQuery, then the ledger.

For one batch of one write (invariants 3-6)::

    ledger says committed      → skip: emit batch_skipped_duplicate; a replay's streams
                                  that nobody can see are orphans (never published)
    ledger says intent         → the intent's mode settles it (modes/<mode>.py, settle):
                                    committed in BigQuery → mark committed, skip the replay
                                    not, and never asked  → write the batch again (below)
    nothing (or written again) → the mode prepares → intent → set-aside rows committed
                                  → the mode publishes → mark committed

How a batch is published and an intent settled is the mode's
(:mod:`onceover_jobs.sink.modes`): one ``BatchCommitWriteStreams`` (pending), a flush of
each stream (buffered), nothing (committed, default: visible as appended). This module
holds what every mode shares: the fence (a driver another took over commits nothing
more), the ledger's records, the replay's checks (the same offsets log entry), the
set-aside rows, which are committed first in every mode (their own
``BatchCommitWriteStreams``: a commit takes one table), and the events.

Spark may call ``abort`` for a batch whose commit took effect (the worker died after
it), so ``abort`` asks the ledger, and the mode asks BigQuery, before anything is called
an orphan.

Which write a batch is (:mod:`onceover_jobs.sink.ledger.identity`) the streaming sink
knows on the driver; for any other write the tasks worked it out and every result names
it (:func:`written_by_tasks`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from onceover.key_checksum import KeyBucket, merged_tally
from onceover.ledger_files import BatchRecord, StreamCommit
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.driver import driver_owner
from onceover_jobs.sink.errors import (
    LedgerError,
    StreamsGoneError,
)
from onceover_jobs.sink.job.results import ChangeCounts, TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob, table_parent
from onceover_jobs.sink.ledger.identity import WriteIdentity
from onceover_jobs.sink.ledger.leases import renew_driver
from onceover_jobs.sink.ledger.offsets_log import (
    check_same_offsets,
    fingerprint,
    source_offsets,
)
from onceover_jobs.sink.ledger.retention import prune
from onceover_jobs.sink.ledger.writes import Sync
from onceover_jobs.sink.modes import mode_of
from onceover_jobs.sink.modes.base import WriteMode
from onceover_jobs.sink.reporting.batch_events import BatchEvents
from onceover_jobs.sink.reporting.telemetry import DRIVER_EVENT_FLUSH_S, Telemetry
from onceover_jobs.sink.wire.batch_commit import batch_commit, commit_time
from onceover_jobs.sink.wire.commit_limits import check_buffer_age

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.write_api import WriteApi

logger = logging.getLogger(__name__)

INTENT_RACES = 3
"""How often a commit settles another driver's intent that appeared as it wrote its own."""

# StorageError codes after which the streams can never be committed, by anyone.
_UNCOMMITTABLE = frozenset({"STREAM_NOT_FOUND", "INVALID_STREAM_TYPE", "INVALID_STREAM_STATE"})


def _now_text() -> str:
    return datetime.now(UTC).isoformat()


def _streams(results: Sequence[TaskResult | None]) -> tuple[StreamCommit, ...]:
    found = [r for r in results if r is not None and r.stream is not None and not r.skipped]
    return tuple(
        StreamCommit(
            r.stream,
            r.rows,
            r.bytes,
            r.partition,
            r.attempt,
            base=r.base,
            finalized_at=r.finalized_at,
        )
        for r in sorted(found, key=lambda r: r.partition)
        if r.stream
    )


def _key_checksum(results: Sequence[TaskResult | None]) -> int | None:
    """The batch's key checksum: its tasks' shares; None unless every task kept one."""
    shares = [r.key_checksum for r in results if r is not None and not r.skipped]
    if not shares or any(share is None for share in shares):
        return None
    return sum(share for share in shares if share is not None)


def _changes(results: Sequence[TaskResult | None]) -> ChangeCounts | None:
    """A CDC batch's upserts and deletes: its tasks' counts; None for a plain append."""
    counts = [r.changes for r in results if r is not None and r.changes is not None]
    return sum(counts, ChangeCounts()) if counts else None


def _key_buckets(results: Sequence[TaskResult | None]) -> tuple[KeyBucket, ...] | None:
    """The batch's key tally: its tasks' shares merged; None unless every task kept one."""
    shares = [r.key_buckets for r in results if r is not None and not r.skipped]
    if not shares or any(share is None for share in shares):
        return None
    return merged_tally(share for share in shares if share is not None)


def _dead_letter_streams(results: Sequence[TaskResult | None]) -> tuple[StreamCommit, ...]:
    """The tasks' PENDING streams on the dead-letter table (onceover_jobs.sink.rows.dead_letter)."""
    found = [r for r in results if r is not None and r.dead_letters is not None and not r.skipped]
    return tuple(
        StreamCommit(d.stream, d.rows, d.bytes, r.partition, r.attempt, finalized_at=d.finalized_at)
        for r in sorted(found, key=lambda r: r.partition)
        if (d := r.dead_letters) is not None
    )


def written_by_tasks(job: SinkJob, results: Sequence[TaskResult | None]) -> SinkJob | None:
    """``job`` as the write its tasks say they belong to; None when no task ran (nothing
    was written, so there is nothing to commit or record)."""
    if isinstance(job.write, WriteIdentity):
        return job
    writes = {r.write for r in results if r is not None and r.write is not None}
    if not writes:
        return None
    if len(writes) > 1:
        raise LedgerError(
            f"the tasks of one write into {job.table} disagree on which write it is: "
            + "; ".join(sorted(w.describe() for w in writes))
            + ". Two writes of one run (or one foreachBatch call) into one table ran at "
            "once: give each a write_id; nothing was committed"
        )
    (write,) = writes
    return job.resolved_as(write)


class BatchCommitter:
    """Commits (or aborts) one batch of one write; built in the driver's commit worker."""

    def __init__(self, job: SinkJob, batch_id: int | None) -> None:
        self.write: WriteIdentity = job.identity  # written_by_tasks first
        if batch_id is None:
            batch_id = self.write.batch_id  # a foreachBatch write: its micro-batch
        self.job = job
        self.batch_id = batch_id
        self.ledger = job.ledger()
        self.telemetry = Telemetry(job, batch_id)
        self.events = BatchEvents(self.telemetry)
        self.mode: WriteMode = mode_of(job.options.mode)
        self._client: WriteApi | None = None

    @property
    def client(self) -> WriteApi:
        if self._client is None:
            from onceover_jobs.sink.wire.write_api import write_api

            self._client = write_api(self.job.bigquery)  # the commit worker keeps it
        return self._client

    @property
    def label(self) -> str:
        if self.write.kind != "streaming":
            return self.write.describe()
        return f"batch {self.telemetry.batch_id_text()} of query {self.job.query_id}"

    # -- commit -------------------------------------------------------------------

    def commit(self, results: Sequence[TaskResult | None]) -> BatchRecord:
        started = time.perf_counter()
        try:
            # Fenced: a driver another took over (its lease lapsed) commits nothing more.
            renew_driver(self.ledger.store, self.write.scope, self.label)
            streams = _streams(results)
            dead_letters = _dead_letter_streams(results)
            for _ in range(INTENT_RACES):
                record = self.ledger.batch(self.batch_id)
                if record is not None and self.job.checkpoint_store is not None:
                    # A replay only if it was written from the same offsets log entry.
                    check_same_offsets(record, self.ledger, self.job.checkpoint_store)
                if record is not None and record.committed:
                    self._skip_duplicate(record, streams)
                    return record
                if record is not None:
                    record = mode_of(record.mode).settle(self, record, streams)
                    if record.committed:
                        self._skip_duplicate(record, streams)
                        return record
                    dead_letters = self._set_aside_already(record, dead_letters)
                committed = self._commit_new(
                    streams, dead_letters, started, replacing=record,
                    key_checksum=_key_checksum(results), key_buckets=_key_buckets(results),
                    changes=_changes(results),
                )  # fmt: skip
                if committed is not None:
                    return committed
                # Another driver wrote its intent for this batch since we looked: settle
                # that one (with its own streams), never a second commit beside it.
            raise LedgerError(
                f"{self.label}: other drivers kept writing intents for this batch; one "
                "checkpoint (or run id) must have one driver at a time"
            )
        finally:
            self.telemetry.flush(DRIVER_EVENT_FLUSH_S)

    def _commit_new(
        self,
        streams: tuple[StreamCommit, ...],
        dead_letters: tuple[StreamCommit, ...],
        started: float,
        *,
        replacing: BatchRecord | None,
        key_checksum: int | None = None,
        key_buckets: tuple[KeyBucket, ...] | None = None,
        changes: ChangeCounts | None = None,
    ) -> BatchRecord | None:
        """Intent, commit, mark; None when another driver's intent got there first."""
        job = self.job
        self.mode.prepare(self, streams)
        if dead_letters:  # PENDING streams in every mode: committed first, as one batch
            check_buffer_age(self.label, str(job.options.dead_letter), dead_letters)
        intent = BatchRecord(
            query_id=job.query_id,
            batch_id=self.batch_id,
            table=job.table,
            mode=job.options.mode,
            state="intent",
            streams=streams,
            expected_rows=sum(s.rows for s in streams),
            intent_at=_now_text(),
            source_offsets=self._source_offsets(),
            owner=driver_owner(),
            dead_letter_table=job.options.dead_letter if dead_letters else None,
            dead_letter_streams=dead_letters,
            key_checksum=key_checksum,
            key_buckets=key_buckets if key_checksum is not None else None,
            offsets=self._offsets(),
            upserts=None if changes is None else changes.upserts,
            deletes=None if changes is None else changes.deletes,
        )
        if not self.ledger.write_intent(intent, replacing=replacing):
            return None
        self.events.intent(intent)
        failpoints.hit("ledger.after_intent")
        publishes = self.mode.traits.publish != "none" and bool(streams)
        if publishes or dead_letters:
            intent = self.commit_started(intent)
        if dead_letters:
            self.commit_dead_letters(intent)
        commit_time = self.mode.publish(self, intent) if streams else None
        # Whole, not durable (no fsync of the directory): a mark a crash of the machine
        # loses leaves the intent, which the next attempt settles without writing a row
        # again (the mode's settle: BigQuery's commit_time, a flush repeated, or as done).
        committed = self.ledger.mark_committed(
            intent, at=_now_text(), commit_time=commit_time, sync=Sync.WHOLE
        )
        self.events.committed(committed, duration_ms=(time.perf_counter() - started) * 1000)
        self._prune()
        logger.info(
            "committed %s: %d rows in %d streams", self.label, committed.expected_rows, len(streams)
        )
        return committed

    def _prune(self) -> None:
        """Old committed batches out of the ledger, in step with Spark's own logs; a
        batch write (one batch) has none."""
        if self.batch_id is None:
            return
        try:
            prune(
                self.ledger,
                newest_batch=self.batch_id,
                keep=self.job.options.ledger_keep_batches,
            )
        except (LedgerError, OSError):  # housekeeping never fails a committed batch
            logger.warning("%s: old ledger batches not pruned", self.label, exc_info=True)

    def _source_offsets(self) -> str | None:
        checkpoint = self.job.checkpoint_store
        if checkpoint is None or self.batch_id is None:
            return None
        return fingerprint(checkpoint, self.batch_id)

    def _offsets(self) -> tuple[str, ...] | None:
        """The receipt's source offsets: the batch's entry in Spark's offsets log."""
        checkpoint = self.job.checkpoint_store
        if checkpoint is None or self.batch_id is None:
            return None
        return source_offsets(checkpoint, self.batch_id)

    def commit_dead_letters(self, record: BatchRecord, *, resolving: bool = False) -> None:
        """Commit the batch's streams on the dead-letter table. ``resolving`` an intent
        an earlier driver left: only if BigQuery shows them uncommitted (streams it no
        longer knows raise :class:`StreamsGoneError`, as the batch's own do)."""
        if not record.dead_letter_streams:
            return
        assert record.dead_letter_table is not None
        names = [s.stream for s in record.dead_letter_streams]
        policy = self.job.retry_policy
        if resolving and commit_time(self.client, policy, names, label=self.label) is not None:
            return
        batch_commit(
            self.client,
            policy,
            table_parent(record.dead_letter_table),
            names,
            table=record.dead_letter_table,
            label=self.label,
        )
        logger.info(
            "%s: %d rows set aside in %s",
            self.label,
            record.dead_lettered_rows,
            record.dead_letter_table,
        )

    def _set_aside_already(
        self, record: BatchRecord, replay: tuple[StreamCommit, ...]
    ) -> tuple[StreamCommit, ...]:
        """Which dead-letter streams a batch written again commits: the intent's, if a
        driver committed them before its batch's streams became uncommittable (those
        rows are set aside already, and must not be twice), else the replay's."""
        if not record.dead_letter_streams or record.commit_started_at is None:
            return replay
        try:
            committed = commit_time(
                self.client,
                self.job.retry_policy,
                [s.stream for s in record.dead_letter_streams],
                label=self.label,
            )
        except StreamsGoneError:
            committed = None
        return record.dead_letter_streams if committed is not None else replay

    def commit_started(self, record: BatchRecord) -> BatchRecord:
        return self.ledger.mark_commit_started(record, at=_now_text())

    def settled(self, record: BatchRecord, *, commit_time: str | None) -> BatchRecord:
        committed = self.ledger.mark_committed(
            record, at=_now_text(), commit_time=commit_time, resolved=True
        )
        self.events.committed(committed, duration_ms=None)
        return committed

    def write_again(
        self, record: BatchRecord, exc: Exception, replay: Sequence[StreamCommit] = ()
    ) -> BatchRecord:
        """The intent's streams can never be committed, and were never committed (no
        commit was asked for, or BigQuery says they are in a state no commit accepts)."""
        logger.warning(
            "%s: the intent's streams can no longer be committed (%s); writing the "
            "batch again on the replay's streams",
            self.label,
            exc,
        )
        kept = {s.stream for s in replay}  # buffered mode: a replay goes on with those
        for stream in record.streams:
            if stream.stream not in kept:
                self.orphaned(stream, "intent's streams uncommittable; written again")
        return record

    def unresolvable(self, record: BatchRecord, exc: Exception) -> str:
        """What is known of an intent no one can settle from BigQuery, and what to do."""
        write = self.ledger.write
        batch = "write" if self.batch_id is None else str(self.batch_id)
        run = self.job.run_id
        where = (
            f"WHERE _onceover_run_id = '{run}' AND _onceover_batch_id = {batch}"
            if self.job.options.stamp and self.batch_id is not None
            else "(with stamp=true, by its run and batch id)"
        )
        settle = (
            f"python -m onceover_jobs.sink.settle --ledger {self.ledger.store.url} --scope "
            f"{self.write.scope} --table {self.job.table}"
            + (f" --write {write}" if write else "")
            + f" --batch {batch} --as"
        )
        return (
            f"{self.label}: its intent (written {record.intent_at} by "
            f"{record.owner or 'an earlier driver'}) names {len(record.streams)} streams "
            f"and {record.expected_rows} rows, and a commit of them was asked for at "
            f"{record.commit_started_at}; BigQuery no longer knows those streams ({exc}), so "
            f"whether the rows are in {self.job.table} cannot be told from here (an "
            "uncommitted PENDING stream is deleted after 24 h; a commit's answer may have "
            "been lost). Nothing more was written. Count the batch's rows in the table "
            f"{where} (docs/guides/reconciliation.md), then settle it: `{settle} committed` if "
            f"they are there, `{settle} rewrite` if not (the next run writes the batch "
            "again)"
        )

    def _skip_duplicate(self, record: BatchRecord, streams: tuple[StreamCommit, ...]) -> None:
        replay = [s for s in streams if s.stream not in {r.stream for r in record.streams}]
        unseen = not mode_of(record.mode).traits.visible_before_commit
        if unseen:
            for stream in replay:
                self.orphaned(stream, "replay of a committed batch; never committed")
        logger.warning("%s is already committed; skipped as a duplicate", self.label)
        self.events.skipped_duplicate(replay, orphaned=unseen)

    def orphaned(self, stream: StreamCommit, reason: str) -> None:
        self.telemetry.stream(
            stream.stream, self.mode.traits.stream_type, stream.partition, stream.attempt
        ).orphaned(reason, stream.rows)

    # -- abort --------------------------------------------------------------------

    def abort(self, results: Sequence[TaskResult | None]) -> None:
        """Spark gave up on the batch; find out what really happened before saying so."""
        try:
            streams = _streams(results)
            record = self.ledger.batch(self.batch_id)
            if record is not None and record.committed:
                logger.warning("abort of %s, which is committed: nothing to undo", self.label)
                return
            if record is not None and mode_of(record.mode).settle(self, record, ()).committed:
                logger.warning(
                    "abort of %s, whose commit took effect: marked committed", self.label
                )
                return
            reason = self.mode.aborted(self, streams)
            self.events.aborted(streams, reason)
        except Exception:
            # abort must not hide the failure that caused it
            logger.exception("abort of %s could not finish its bookkeeping", self.label)
        finally:
            self.telemetry.flush(DRIVER_EVENT_FLUSH_S)
