"""The batches one ingest touches: each write's row, moved by its batch events (intent,
commit, replay skipped, abort, an overwrite's swap) in whatever order they arrive."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection
from sqlmodel import Session, select

from onceover import events as ev
from onceover_backend.services.ingest.commit_hours import CommitHours
from onceover_backend.services.ingest.streams import StreamProjection, raise_state
from onceover_backend.services.ingest.times import earlier, in_utc, later
from onceover_backend.tables import Batch

BATCH_RANK = {"intent": 0, "aborted": 1, "skipped_duplicate": 2, "committed": 3}
SWAP_RANK = {None: 0, "started": 1, "swapped": 2}
"""An overwrite's swap only moves forward: asked for (again, under the next job id after a
failed one), then done."""

BatchKey = tuple[str, str, str, str]  # run, table, query, batch key


def batch_key(batch_id: int | None, write: str | None) -> str:
    """One row per write: a foreachBatch call (or a batch run) may write one table more
    than once, and each write commits (or not) on its own."""
    batch = "-" if batch_id is None else str(batch_id)
    return batch if write is None else f"{batch}/{write}"


@dataclass
class BatchProjection:
    """The batches of one ingest's events; the streams they commit or orphan are
    ``streams``'."""

    session: Session
    streams: StreamProjection
    rows: dict[BatchKey, Batch] = field(default_factory=dict)
    _commit_hours: CommitHours = field(default_factory=CommitHours)

    def apply(self, event: ev.BatchEvent, time: datetime) -> None:
        """Apply one batch event; ``time``: the event's, in UTC."""
        batch = self._batch(event)
        batch.stamped = batch.stamped or event.stamped
        if event.key and batch.key_column != event.key:
            batch.key_column = event.key
        if isinstance(event, ev.OverwriteSwapStarted | ev.OverwriteSwapped):
            self._apply_swap(batch, event, time)
            return
        if isinstance(event, ev.BatchIntent):
            if batch.intent_at is None or time >= batch.intent_at:
                batch.expected_rows = event.expected_rows
                if batch.state != "committed":
                    batch.streams = [s.model_dump(mode="json") for s in event.streams]
                    self._set_aside(batch, event)
            batch.intent_at = earlier(batch.intent_at, time)
            state = "intent"
        elif isinstance(event, ev.BatchCommitted):
            self._apply_commit(batch, event, time)
            state = "committed"
        elif isinstance(event, ev.BatchSkippedDuplicate):
            batch.replays += 1
            batch.rows_rewritten += event.rows
            batch.skipped_at = later(batch.skipped_at, time)
            for name in event.orphaned_streams:
                stream = self.streams.get(event.run_id, name)
                if stream is not None:
                    raise_state(stream, "orphaned")
            state = "skipped_duplicate"
        else:
            batch.aborted_at = later(batch.aborted_at, time)
            batch.abort_reason = event.reason
            state = "aborted"
        if BATCH_RANK[state] > BATCH_RANK[batch.state]:
            batch.state = state

    def write(self, connection: Connection) -> None:
        """Add the commits that moved to their hours (the batches flushed already)."""
        self._commit_hours.write(connection, self.rows)

    def _batch(self, event: ev.BatchEvent) -> Batch:
        key = (event.run_id, event.table, event.query_id, batch_key(event.batch_id, event.write))
        batch = self.rows.get(key)
        if batch is None:
            batch = self.session.exec(
                select(Batch).where(
                    Batch.run_id == key[0],
                    Batch.table_id == key[1],
                    Batch.query_id == key[2],
                    Batch.batch_key == key[3],
                )
            ).first()
        if batch is None:
            batch = Batch(
                run_id=event.run_id,
                table_id=event.table,
                query_id=event.query_id,
                batch_id=event.batch_id,
                batch_key=key[3],
                write=event.write,
                mode=event.mode,
                state="intent",
                # Given, not left to their default_factory: pydantic inspects a factory's
                # signature at every call (docs/journal/profiling.md, "Third round").
                streams=[],
                dead_letter_streams=[],
            )
            self.session.add(batch)
        self._commit_hours.note(key, batch)
        self.rows[key] = batch
        return batch

    def _apply_commit(self, batch: Batch, event: ev.BatchCommitted, time: datetime) -> None:
        first = batch.committed_at is None or time < batch.committed_at
        if first:
            batch.rows = event.rows
            batch.streams = [s.model_dump(mode="json") for s in event.streams]
            batch.commit_ms = event.duration_ms
            self._set_aside(batch, event)
        self._receipt(batch, event, first=first)
        batch.committed_at = earlier(batch.committed_at, time)
        batch.resolved = batch.resolved or event.resolved
        for rows in event.streams:
            self.streams.of_batch(event, rows, time).state = "committed"
        if event.dead_letter_table is not None:
            for rows in event.dead_letter_streams:
                self.streams.of_batch(
                    event, rows, time, event.dead_letter_table
                ).state = "committed"

    @staticmethod
    def _apply_swap(batch: Batch, event: ev.SwapEvent, time: datetime) -> None:
        """The swap as its furthest event says (done over asked for, a later attempt over
        an earlier), whichever arrives first."""
        state = "swapped" if isinstance(event, ev.OverwriteSwapped) else "started"
        if isinstance(event, ev.OverwriteSwapStarted):
            batch.swap_started_at = earlier(batch.swap_started_at, time)
        if (SWAP_RANK[state], event.attempt) < (
            SWAP_RANK[batch.swap_state],
            batch.swap_attempt or 0,
        ):
            return
        batch.swap_state = state
        batch.swap_job_id = event.job_id
        batch.swap_attempt = event.attempt
        batch.swap_staging = event.staging
        batch.swap_scope = event.scope
        batch.swap_staged_rows = event.staged_rows
        batch.swap_rows_replaced = event.rows_replaced
        batch.swap_partitions = None if event.partitions is None else list(event.partitions)
        batch.swap_partition_count = event.partition_count
        if isinstance(event, ev.OverwriteSwapped):
            batch.swapped_at = in_utc(event.swapped_at)

    @staticmethod
    def _receipt(batch: Batch, event: ev.BatchCommitted, *, first: bool) -> None:
        """The batch's receipt (commit time, source offsets, key checksum and tally): the first
        commit's stands, whichever report arrives first; a later report (the batch
        committed again, found committed on replay) only fills what the first left null.
        Only assigned when it changes (see :class:`~.tallies.RunTally`)."""
        fields: dict[str, Any] = {
            "commit_time": event.commit_time,
            "source_offsets": event.source_offsets,
            "key_checksum": event.key_checksum,
            "key_buckets": (
                None if event.key_buckets is None else [list(b) for b in event.key_buckets]
            ),
        }
        for name, value in fields.items():
            if value is None:
                continue
            current = getattr(batch, name)
            if (first or current is None) and current != value:
                setattr(batch, name, value)

    @staticmethod
    def _set_aside(batch: Batch, event: ev.BatchIntent | ev.BatchCommitted) -> None:
        """What the batch set aside in its dead-letter table, as ``event`` says; only
        assigned when it changes (see :class:`~.tallies.RunTally`)."""
        if batch.dead_lettered_rows != event.dead_lettered_rows:
            batch.dead_lettered_rows = event.dead_lettered_rows
        if event.upserts is not None and batch.upserts != event.upserts:  # a CDC write's
            batch.upserts = event.upserts
        if event.deletes is not None and batch.deletes != event.deletes:
            batch.deletes = event.deletes
        if batch.dead_letter_table != event.dead_letter_table:
            batch.dead_letter_table = event.dead_letter_table
        streams = [s.model_dump(mode="json") for s in event.dead_letter_streams]
        if batch.dead_letter_streams != streams:
            batch.dead_letter_streams = streams
