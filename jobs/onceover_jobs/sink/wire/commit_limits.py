"""BigQuery's limits on one ``BatchCommitWriteStreams``, checked before rows are written.

A pending-mode batch is committed in one call, with one stream per non-empty partition.
BigQuery takes at most 10,000 streams in one call ("Storage Write API quotas and
limits"); a batch of more partitions could write every row and then never commit. So a
task whose partition number is at or past the limit refuses before it creates a stream,
naming the numbers and the fix, and the driver checks the count again before it writes
an intent (a safety net: it never reaches BigQuery).

One call also commits at most 1 TB of pending data in a regional dataset, 10 TB in a
multi-region one. A batch's bytes are known only once its tasks have written them, so
the driver checks them (the bytes of the append requests its tasks report) before it
writes an intent: a batch over the limit is never committed and none of it becomes
visible, rather than failing in BigQuery with its intent left behind. The dataset's
location is looked up only for a batch over the smaller limit.

And BigQuery keeps a finalized stream's rows only so long: "After the stream is finalized
and before it is committed, the data can remain in the buffer for up to 4 hours"
(``write-api-batch``). A commit after that may commit a stream whose rows are gone, and
its answer would not say so. So no stream finalized longer ago than
:data:`PENDING_BUFFER_S` less :data:`BUFFER_MARGIN_S` (the tasks' clocks may run apart from
the driver's) is ever committed: a new batch with one is refused before its intent
(:func:`check_buffer_age`: the batch is written again by the replay, or by a re-run of the
write), and an intent left with them is written again rather than committed
(:func:`expired_streams`, onceover_jobs.sink.modes.pending).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from onceover.ledger_files import StreamCommit
from onceover_jobs.sink.errors import CommitLimitError, PendingBufferError

MAX_STREAMS_PER_COMMIT = 10_000
"""Streams one BatchCommitWriteStreams takes (BigQuery's documented limit)."""
REGIONAL_COMMIT_BYTES = 10**12
"""Pending data one BatchCommitWriteStreams commits in a regional dataset ("1 TB")."""
MULTI_REGION_COMMIT_BYTES = 10 * 10**12
"""... and in a multi-region dataset ("10 TB")."""
MULTI_REGIONS = frozenset({"US", "EU"})
PENDING_BUFFER_S = 4 * 3600.0
"""How long BigQuery keeps a finalized PENDING stream's rows for a commit ("up to 4 hours")."""
BUFFER_MARGIN_S = 30 * 60.0
"""Taken off :data:`PENDING_BUFFER_S`: clocks apart, and the commit's own time."""


def commit_bytes_limit(location: str | None) -> int:
    """The pending bytes one commit takes in a dataset at ``location``."""
    if location is not None and location.upper() in MULTI_REGIONS:
        return MULTI_REGION_COMMIT_BYTES
    return REGIONAL_COMMIT_BYTES


def check_partition(table: str, partition: int, limit: int = MAX_STREAMS_PER_COMMIT) -> None:
    """Refuse a pending-mode task whose batch would need more streams than one commit takes."""
    if partition >= limit:
        raise CommitLimitError(
            f"the write into {table} has more than {limit:,} partitions (this is partition "
            f"{partition}): in pending mode each non-empty partition is a stream, and one "
            f"BatchCommitWriteStreams commits at most {limit:,} streams, so the batch could "
            f"never be committed. Nothing of it was written. Fix: df.coalesce({limit:,}) "
            "(or fewer) before the sink, or mode=committed, which commits nothing at the end"
        )


def check_streams(
    label: str, table: str, streams: int, limit: int = MAX_STREAMS_PER_COMMIT
) -> None:
    """Before the intent: a batch of more streams than one commit takes is refused."""
    if streams > limit:
        raise CommitLimitError(
            f"{label}: {streams:,} streams to commit into {table}, more than the {limit:,} "
            "one BatchCommitWriteStreams takes; nothing was committed and no intent written. "
            f"Fix: df.coalesce({limit:,}) (or fewer) before the sink, or mode=committed"
        )


def check_bytes(label: str, table: str, pending: int, location: Callable[[], str | None]) -> None:
    """Before the intent: a batch of more pending bytes than one commit takes is refused.
    ``location`` gives the table's dataset location, asked only past 1 TB."""
    if pending <= REGIONAL_COMMIT_BYTES:
        return
    where = location()
    limit = commit_bytes_limit(where)
    if pending > limit:
        raise CommitLimitError(
            f"{label}: {pending:,} bytes of pending data to commit into {table} (dataset "
            f"location {where or 'unknown'}), more than the {limit:,} one "
            "BatchCommitWriteStreams commits there; nothing was committed, no intent "
            "written, and none of the rows is visible. Fix: split the write (one write "
            "per slice of a column, each with its own write_id), or mode=buffered, which "
            "publishes each stream with FlushRows and has no such limit"
        )


def expired_streams(
    streams: Sequence[StreamCommit], now: datetime | None = None
) -> list[tuple[StreamCommit, float]]:
    """The streams finalized too long ago to be committed, each with its age in seconds
    (a stream without ``finalized_at`` is taken as fresh: nothing says otherwise)."""
    at = now or datetime.now(UTC)
    limit = PENDING_BUFFER_S - BUFFER_MARGIN_S
    old = []
    for stream in streams:
        if stream.finalized_at is None:
            continue
        age = (at - datetime.fromisoformat(stream.finalized_at)).total_seconds()
        if age > limit:
            old.append((stream, age))
    return old


def check_buffer_age(
    label: str, table: str, streams: Sequence[StreamCommit], now: datetime | None = None
) -> None:
    """Before the intent: a batch with a stream finalized too long ago is refused."""
    old = expired_streams(streams, now)
    if not old:
        return
    stream, age = max(old, key=lambda found: found[1])
    raise PendingBufferError(
        f"{label}: {len(old)} of its {len(streams)} streams into {table} were finalized "
        f"more than {(PENDING_BUFFER_S - BUFFER_MARGIN_S) / 3600:g} h ago (the oldest, "
        f"partition {stream.partition}, {age / 3600:.1f} h ago). BigQuery keeps a finalized "
        "stream's rows for up to 4 hours before they are committed, so the batch is not "
        "committed: nothing of it is visible and no intent was written. Running the write "
        "again (a streaming query: restarting it) writes the batch again on new streams. "
        "Fix: finish the batch's tasks within about 3 hours of each other (more executors, "
        "or smaller batches: maxFilesPerTrigger, or one write per slice)"
    )
