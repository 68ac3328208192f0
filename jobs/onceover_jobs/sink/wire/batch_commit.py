"""``BatchCommitWriteStreams`` and the question a replay asks after it: committed or not?

One call commits a table's streams atomically: all of them, or none. BigQuery's answer can
be lost, so a commit is asked again; a repeat of a commit that took effect answers
``STREAM_ALREADY_COMMITTED`` for every stream, which is read as done (and the commit
time is then asked of each stream). An answer without a commit time means "not
committed" (BigQuery's API: "if this field is not set, it means the commit was not
successful"), and committing again is safe. Streams BigQuery no longer knows raise
:class:`~onceover_jobs.sink.errors.StreamsGoneError`; streams in a state no commit accepts
raise :class:`~onceover_jobs.sink.errors.StreamsUncommittableError`: the caller decides
whether the batch can be written again (it can, only if no commit was ever asked for).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import (
    CommitRejectedError,
    LedgerError,
    StreamsGoneError,
    StreamsUncommittableError,
)
from onceover_jobs.sink.wire.unary import CallNotFoundError, call_with_retry

if TYPE_CHECKING:
    from onceover_jobs.sink.wire.retry import RetryPolicy
    from onceover_jobs.sink.wire.write_api import WriteApi

logger = logging.getLogger(__name__)

COMMIT_TRIES = 5
"""Commits asked for before giving up on an answer (lost, or without a commit time)."""
UNCOMMITTABLE = frozenset({"STREAM_NOT_FOUND", "INVALID_STREAM_TYPE", "INVALID_STREAM_STATE"})
"""``StorageError`` codes after which the streams can never be committed, by anyone."""


def batch_commit(
    client: WriteApi,
    policy: RetryPolicy,
    parent: str,
    names: Sequence[str],
    *,
    table: str,
    label: str,
) -> str | None:
    """Commit ``names`` on the table ``parent`` names; returns BigQuery's commit time.
    ``label`` names the batch in messages."""
    for attempt in range(1, COMMIT_TRIES + 1):
        try:
            response = call_with_retry(
                policy,
                lambda timeout: client.batch_commit_write_streams(
                    parent, list(names), timeout=timeout
                ),
                what="BatchCommitWriteStreams",
                on=parent,
            )
        except CallNotFoundError as exc:  # a stream that is gone: no one can commit it
            raise StreamsGoneError(f"{label}: {exc.message}") from exc
        if failpoints.hit("commit.after"):
            logger.warning("%s: commit response lost (failpoint); asking again", label)
            continue
        if not response.stream_errors:
            if response.commit_time:
                return response.commit_time
            # Nothing is committed yet; committing again is safe (an earlier try that did
            # take effect answers STREAM_ALREADY_COMMITTED).
            logger.warning(
                "%s: BatchCommit answered without a commit time (not committed); "
                "committing again (try %d)",
                label,
                attempt,
            )
            continue
        codes = {e.code for e in response.stream_errors}
        if codes == {"STREAM_ALREADY_COMMITTED"} and len(response.stream_errors) == len(names):
            # Our own earlier try took effect; BigQuery's commit is atomic per table.
            logger.info("%s: already committed (retry %d after a lost response)", label, attempt)
            return commit_time(client, policy, names, label=label)
        refused = f"BigQuery refused to commit {label} into {table}: " + "; ".join(
            f"{e.entity}: {e.message}" for e in response.stream_errors
        )
        if codes == {"STREAM_NOT_FOUND"}:
            raise StreamsGoneError(refused)
        if codes <= UNCOMMITTABLE:
            raise StreamsUncommittableError(refused)
        raise CommitRejectedError(refused)
    raise CommitRejectedError(
        f"{label}: BigQuery did not confirm the commit of {table} in {COMMIT_TRIES} "
        "tries (answers lost, or without a commit time); its intent is in the ledger, "
        "and a restart asks BigQuery whether its streams were committed"
    )


def commit_time(
    client: WriteApi, policy: RetryPolicy, names: Sequence[str], *, label: str
) -> str | None:
    """The commit time if every stream is committed, None if none is; a stream BigQuery
    no longer knows raises :class:`StreamsGoneError` (expired, or forgotten: the caller
    decides), some committed and some not a :class:`LedgerError` (one commit never
    leaves that: a person must look)."""
    times = []
    for name in names:
        try:
            stream = call_with_retry(
                policy,
                lambda timeout, name=name: client.get_write_stream(name, timeout=timeout),
                what="GetWriteStream",
                on=name,
            )
        except CallNotFoundError as exc:
            raise StreamsGoneError(f"{label}: {exc.message}") from exc
        times.append(stream.commit_time)
    if all(times):
        return max(t for t in times if t)
    if any(times):
        raise LedgerError(
            f"{label}: BigQuery shows only some of its streams committed "
            f"({sum(1 for t in times if t)} of {len(times)}); BatchCommitWriteStreams "
            "is atomic, so this needs a person: reconcile the table before resuming"
        )
    return None
