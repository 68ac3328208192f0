"""BigQuery's limits on one ``BatchCommitWriteStreams``, checked before rows are written.

A pending-mode batch is committed in one call, with one stream per non-empty partition.
BigQuery takes at most 10,000 streams in one call ("Storage Write API quotas and
limits"); a batch of more partitions could write every row and then never commit. So a
task whose partition number is at or past the limit refuses before it creates a stream,
naming the numbers and the fix, and the driver checks the count again before it writes
an intent (a safety net: it never reaches BigQuery).
"""

from __future__ import annotations

from jobs.sink.errors import CommitLimitError

MAX_STREAMS_PER_COMMIT = 10_000
"""Streams one BatchCommitWriteStreams takes (BigQuery's documented limit)."""


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
