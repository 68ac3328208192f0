"""Long-lived streams: one BUFFERED (buffered mode) or COMMITTED (committed mode) stream
per partition number of a write target, continued from one batch to the next.

BigQuery allows 10,000 CreateWriteStream calls per hour per project and region; a
stream per partition and micro-batch spends that in an hour on one small query with a
1-second trigger (2 partitions: 7,200). So a partition's stream is kept in a *slot*
and the next batch's same partition appends after the rows the last one left there.

A slot is a versioned record under ``<ledger directory>/streams/<partition>/``, saved
by compare-and-swap like a partition's progress (each version created exclusively)::

    {stream, batch, base, end, flushed}

``batch`` took the slot to write its rows from offset ``base``; ``end`` is set once
that batch's partition is complete (every row acknowledged and recorded), and is where
the next batch starts. In buffered mode the driver sets ``flushed`` (to ``end``) once
the batch's commit has flushed the stream that far.

The exactly-once argument is unchanged: a batch's rows go at offsets recorded in its
partition's progress before they are sent, so a retry or a replay finds them; what the
slot adds is only *where* the next batch begins:

- a slot with ``end``: continue the stream at ``end`` (nothing else writes there: the
  batch that took it finished, and a later attempt of a finished partition sends
  nothing). In buffered mode only once ``flushed`` reached ``end``: a flush makes
  every row before its offset visible, so the next batch's flush would publish the
  earlier batch's rows too, and that batch may never have been committed (a
  foreachBatch call that caught its failure and went on);
- a slot taken by this very batch, whose attempt wrote no progress yet (it stopped
  between taking the slot and recording its partition): continue at ``base``;
- anything else (no slot, or a batch that took it and never finished: a foreachBatch
  call that caught the failure and went on, whose replay may still write there): a new
  stream, so no two batches ever share offsets.

If BigQuery refuses an offset all the same (ALREADY_EXISTS for a request never sent),
the appender stops the task rather than risk a duplicate (invariant 1).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from onceover.ledger_files import read_payload
from onceover.ledger_store import join
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger, newest_versions
from onceover_jobs.sink.ledger.writes import write_exclusively

KEPT_VERSIONS = 2
"""Versions of a slot kept: the newest and the one a reader may be on."""
READ_RACES = 10


@dataclass(frozen=True)
class StreamSlot:
    stream: str
    batch: str
    """The batch (``onceover.ledger_files.batch_name``) that took the slot last."""
    base: int
    """Where that batch's rows start on the stream."""
    end: int | None = None
    """Where they end, once the batch's partition is complete: the next batch's start."""
    flushed: int | None = None
    """Buffered mode: the stream is flushed up to here (exclusive), by the batch's commit."""
    taken_at: float = 0.0
    revision: int = 0


class StreamSlots:
    """The slots of one write target (one :class:`~onceover_jobs.sink.ledger.records.Ledger`)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.store = ledger.store
        self.directory = join(ledger.directory, "streams")

    def _version_key(self, partition: int, revision: int) -> str:
        return join(self.directory, str(partition), f"v{revision:09d}.json")

    def _where(self, partition: int) -> str:
        return self.store.where(join(self.directory, str(partition)))

    def current(self, partition: int) -> StreamSlot | None:
        directory = join(self.directory, str(partition))
        for _ in range(READ_RACES):
            versions = newest_versions(self.store.list(directory).files)
            if not versions:
                return None
            payload = read_payload(self.store, join(directory, versions[-1]))
            if payload is not None:
                return StreamSlot(**payload)
            # pruned between the listing and the read: a newer one exists; list again
        raise LedgerError(f"{self._where(partition)}: its versions kept changing under the reader")

    def save(self, partition: int, slot: StreamSlot, *, after: StreamSlot | None) -> bool:
        """Save ``slot`` as the version after ``after`` (None: the first); False when
        another attempt saved that version first."""
        revision = 0 if after is None else after.revision + 1
        saved = replace(slot, revision=revision)
        won = write_exclusively(self.store, self._version_key(partition, revision), asdict(saved))
        if won and revision >= KEPT_VERSIONS:
            self.store.delete(self._version_key(partition, revision - KEPT_VERSIONS))
        return won

    def take(self, partition: int, stream: str, batch: str, base: int) -> StreamSlot:
        """Take the slot for ``batch`` on ``stream`` from ``base``; if another attempt of
        the same batch took it first, return that attempt's slot instead."""
        before = self.current(partition)
        slot = StreamSlot(stream=stream, batch=batch, base=base, taken_at=round(time.time(), 3))
        if self.save(partition, slot, after=before):
            return replace(slot, revision=0 if before is None else before.revision + 1)
        winner = self.current(partition)
        if winner is None or winner.batch != batch:
            raise LedgerError(
                f"{self._where(partition)}: the stream slot of partition {partition} "
                f"moved to batch {winner.batch if winner else '?'} while batch {batch} took it"
            )
        return winner

    def finish(self, partition: int, stream: str, batch: str, end: int) -> None:
        """Record that ``batch`` left ``stream`` at ``end`` (the next batch's start).
        Nothing to do when the slot is no longer this batch's on this stream."""
        self._amend(partition, stream, batch, "its end", end, flushed=False)

    def flushed(self, partition: int, stream: str, batch: str, end: int) -> None:
        """Record that ``batch``'s commit flushed ``stream`` up to ``end`` (buffered
        mode), so the next batch may continue it. Nothing to do when the slot moved on."""
        self._amend(partition, stream, batch, "its flush", end, flushed=True)

    def _amend(
        self, partition: int, stream: str, batch: str, what: str, end: int, *, flushed: bool
    ) -> None:
        """Save ``end`` (and, if ``flushed``, that the stream is flushed to it) into the
        slot while it is ``batch``'s on ``stream``."""
        for _ in range(READ_RACES):
            slot = self.current(partition)
            if slot is None or slot.batch != batch or slot.stream != stream:
                return
            amended = replace(slot, end=end, flushed=end if flushed else slot.flushed)
            if amended == slot:
                return
            if self.save(partition, amended, after=slot):
                return
        raise LedgerError(f"{self._where(partition)}: could not record {what}")


def continuation(
    slot: StreamSlot | None, batch: str, *, after_flush: bool = False
) -> tuple[str, int] | None:
    """The stream and offset where ``batch`` may continue in the partition whose slot is
    ``slot``, or None when it must take a new stream (see the module's rules).
    ``after_flush``: buffered mode, where only a flushed end may be continued, and a
    slot this batch took already never is (an earlier attempt may have written there)."""
    if slot is None:
        return None
    if slot.end is not None and slot.batch != batch:
        if after_flush and slot.flushed != slot.end:
            return None
        return slot.stream, slot.end
    if slot.batch == batch and slot.end is None and not after_flush:
        # This batch took it; its partition wrote no progress yet (the caller looked).
        return slot.stream, slot.base
    return None
