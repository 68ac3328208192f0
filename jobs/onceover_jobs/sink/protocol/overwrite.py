"""The driver's side of ``mode("overwrite")``: stage exactly once, then swap exactly once.

For one overwrite write (:mod:`onceover_jobs.sink.table.overwrite` says why these steps)::

    1. stage      the rows into the staging table: the two-phase commit of any batch
                  (protocol/committer.py), so a replay stages nothing twice
    2. swap       ledger says swapped  → done: a re-run changes nothing
                  ledger says swapping → ask for its job again (same id): its outcome
                  nothing              → record the swap (its job id), then ask for it
                  the job failed       → its transaction rolled back: the old rows are
                                         whole; a transient failure is tried again under
                                         the next id, any other raises, naming it
    3. mark       swapped, in the ledger
    4. clean up   drop the staging tables (they expire anyway)

A crash anywhere leaves the old rows (before the transaction committed) or the new ones
(after), and the next attempt of the same run goes on from the step the ledger shows,
never staging or swapping twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from onceover.ledger_files import BatchRecord, SwapRecord, read_swap
from onceover_jobs.sink import failpoints
from onceover_jobs.sink.errors import OverwriteError
from onceover_jobs.sink.job.results import TaskResult
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.swaps import begin_swap, mark_swapped
from onceover_jobs.sink.protocol.committer import BatchCommitter
from onceover_jobs.sink.table.overwrite import (
    STAGED_ROWS_CHANGED,
    STAGING_LIFETIME_S,
    ScopeFigures,
    drop_staging,
    scope_figures,
    scope_of,
    swap_script,
    table_of_stream,
)
from onceover_jobs.sink.table.swap_job import job_id_of, run_once

logger = logging.getLogger(__name__)

SWAP_ATTEMPTS = 5
"""Transactions tried after transient failures before the write gives up (old rows kept)."""


def commit_overwrite(job: SinkJob, results: Sequence[TaskResult | None]) -> BatchRecord:
    """Replace the overwrite's scope of ``job.table`` with the rows its tasks staged."""
    assert job.overwrite is not None
    committer = BatchCommitter(job, None)
    staged = committer.commit(results)  # 1. exactly once, in the staging table
    failpoints.hit("overwrite.after_staged")
    ledger, batch_id = committer.ledger, committer.batch_id
    swap = read_swap(ledger.store, ledger.directory, batch_id)
    if swap is None or not swap.swapped:
        swap = _swap(job, committer, staged, swap)  # 2.
        failpoints.hit("overwrite.after_swap")
        swap = mark_swapped(ledger, batch_id, swap, at=_now())  # 3.
        committer.events.swapped(swap)
        logger.warning(
            "onceover: %s replaced %s (%s rows) with %d rows (job %s)",
            committer.label, swap.scope, swap.rows_replaced, swap.staged_rows, swap.job_id,
        )  # fmt: skip
    else:
        logger.warning(
            "onceover: %s already replaced %s (job %s, at %s): nothing changed",
            committer.label, swap.scope, swap.job_id, swap.swapped_at,
        )  # fmt: skip
    for staging in sorted({swap.staging, job.overwrite.staging}):  # 4.
        drop_staging(job.bigquery, staging)
    return staged


def _swap(
    job: SinkJob, committer: BatchCommitter, staged: BatchRecord, started: SwapRecord | None
) -> SwapRecord:
    from onceover_jobs.sink.rows.schema import rest_client

    assert job.overwrite is not None
    ledger, batch_id = committer.ledger, committer.batch_id
    # Where the staged rows are: the committed streams' table (a replay may have committed
    # an earlier attempt's), else (no row staged) this driver's own, empty.
    staging = (
        started.staging
        if started is not None
        else table_of_stream(staged.streams[0].stream)
        if staged.streams
        else job.overwrite.staging
    )
    target = rest_client(job.bigquery).get_table(job.table)
    scope = scope_of(target, dynamic=job.overwrite.dynamic, partition=job.date_partition)
    columns = [f.name for f in target.schema]
    sql = swap_script(job.table, staging, columns, scope, staged.expected_rows)
    # Counted once, before the first attempt: a later one finds the rows already replaced.
    figures = (
        _figures_of(started)
        if started is not None
        else scope_figures(job.bigquery, job.table, staging, scope)
    )
    record = started
    attempt = 0 if started is None else started.attempt
    tries = 0
    while True:
        job_id = job_id_of(ledger.store.where(ledger.directory), str(batch_id), attempt=attempt)
        if record is None or record.job_id != job_id:
            fresh = SwapRecord(
                state="swapping", target=job.table, staging=staging, scope=scope.describe(),
                job_id=job_id, attempt=attempt, started_at=_now(),
                staged_rows=staged.expected_rows, rows_replaced=figures.rows_replaced,
                partitions=None if figures.partitions is None else list(figures.partitions),
                partition_count=figures.partition_count,
            )  # fmt: skip
            begin_swap(ledger, batch_id, fresh, replacing=record)
            committer.events.swap_started(fresh)
            record = fresh
        failpoints.hit("overwrite.before_swap")
        outcome = run_once(job.bigquery, job_id, sql, deadline_s=job.options.retry_deadline_s)
        if outcome.succeeded:
            return record
        inherited = tries == 0 and started is not None and started.job_id == job_id
        tries += 1
        # A job an earlier run asked for and saw fail is tried again whatever it said:
        # this run may have fixed what it was (a schema, a permission).
        if STAGED_ROWS_CHANGED in str(outcome.error):
            raise OverwriteError(
                f"{committer.label}: the staged rows are gone from {staging} (it expires "
                f"{STAGING_LIFETIME_S // 86_400} days after the write, or was changed): "
                f"{outcome.error.get('message') if outcome.error else ''}. The swap checked "
                f"it and rolled back, so {job.table} holds its old rows. The ledger holds the "
                "rows as staged, so this run_id cannot stage them again: run the write with "
                "a new run_id"
            )
        if not inherited and (not outcome.retryable or tries >= SWAP_ATTEMPTS):
            raise OverwriteError(
                f"{committer.label}: the swap into {job.table} failed (job {job_id}: "
                f"{outcome.error}); its transaction rolled back, so the table holds its old "
                f"rows. The staged rows stay in {staging} until it expires; a run with the "
                "same run_id asks for the swap again without staging anything"
            )
        logger.warning("onceover: swap job %s failed (%s); trying again", job_id, outcome.error)
        attempt += 1


def _figures_of(record: SwapRecord) -> ScopeFigures:
    """The figures the first attempt counted, kept in its record."""
    listed = None if record.partitions is None else tuple(record.partitions)
    return ScopeFigures(record.rows_replaced or 0, listed, record.partition_count)


def _now() -> str:
    return datetime.now(UTC).isoformat()
