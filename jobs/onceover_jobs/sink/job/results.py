"""What a task tells the driver: its stream and the rows it staged there.

A module of its own, with no import heavier than the standard library's: these values
travel in Spark's commit messages, and the driver's commit worker, which unpickles them,
should not have to import what the tasks write with (pyarrow, the client library).
"""

from __future__ import annotations

from dataclasses import dataclass

from onceover.key_checksum import KeyBucket
from onceover_jobs.sink.ledger.identity import WriteIdentity


@dataclass(frozen=True)
class TaskResult:
    """What a task tells the driver (wrapped in the Spark commit message)."""

    stream: str | None
    stream_type: str
    rows: int
    bytes: int
    partition: int
    attempt: int
    skipped: bool = False
    """The batch was already committed: the task wrote nothing."""
    write: WriteIdentity | None = None
    """The write the task worked out it belongs to; the driver commits that write."""
    base: int = 0
    """Where the partition's rows start on ``stream`` (a stream continued across batches)."""
    dead_letters: DeadLetters | None = None
    """The rows BigQuery refused, set aside on a PENDING stream of the dead-letter table
    (finalized; the driver commits it with the batch)."""
    key_checksum: int | None = None
    """The partition's share of the batch's key checksum (onceover_jobs.sink.rows.key_tally);
    None when the write keeps none."""
    key_buckets: tuple[KeyBucket, ...] | None = None
    """The partition's share of the batch's key tally (onceover.key_checksum), kept with
    the checksum; None when the write keeps none."""
    finalized_at: str | None = None
    """When the task finalized its PENDING stream (its clock, ISO 8601)."""
    changes: ChangeCounts | None = None
    """A change data capture write: the partition's upserts and deletes sent; None for
    a plain append."""


@dataclass(frozen=True)
class ChangeCounts:
    """A CDC partition's or batch's changes, by kind (onceover_jobs.sink.rows.change_capture)."""

    upserts: int = 0
    deletes: int = 0

    def __add__(self, other: ChangeCounts) -> ChangeCounts:
        return ChangeCounts(self.upserts + other.upserts, self.deletes + other.deletes)


@dataclass(frozen=True)
class DeadLetters:
    """A task's PENDING stream on the dead-letter table."""

    stream: str
    rows: int
    bytes: int
    keys: tuple[str | None, ...] = ()
    """The refused rows' keys, as text: the key checksum leaves them out."""
    finalized_at: str | None = None
    """When the task finalized the stream (its clock, ISO 8601)."""
