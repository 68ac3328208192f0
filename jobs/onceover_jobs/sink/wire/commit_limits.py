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
"""

from __future__ import annotations

from collections.abc import Callable

from onceover_jobs.sink.errors import CommitLimitError

MAX_STREAMS_PER_COMMIT = 10_000
"""Streams one BatchCommitWriteStreams takes (BigQuery's documented limit)."""
REGIONAL_COMMIT_BYTES = 10**12
"""Pending data one BatchCommitWriteStreams commits in a regional dataset ("1 TB")."""
MULTI_REGION_COMMIT_BYTES = 10 * 10**12
"""... and in a multi-region dataset ("10 TB")."""
MULTI_REGIONS = frozenset({"US", "EU"})


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
