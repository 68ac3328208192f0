"""A stored batch as the API shows it: its receipt, and an overwrite's swap with it."""

from __future__ import annotations

from onceover.ledger_files import staging_table_of
from onceover_backend.models import BatchPublic, OverwritePublic, OverwriteStep
from onceover_backend.tables import Batch


def batch_public(batch: Batch) -> BatchPublic:
    return BatchPublic.model_validate(
        {**batch.model_dump(), "table": batch.table_id, "overwrite": overwrite_of(batch)}
    )


def staging_of(batch: Batch) -> str | None:
    """Where an overwrite's batch staged its rows (its swap events say, or its streams'
    table, which is not the batch's); None for an append."""
    if batch.swap_staging is not None:
        return batch.swap_staging
    return staging_table_of(batch.table_id, (str(s.get("stream", "")) for s in batch.streams))


def overwrite_step(batch: Batch) -> OverwriteStep | None:
    """How far an overwrite got, from what was heard of it; None for an append."""
    if batch.swap_state == "swapped":
        return "swapped"
    if batch.swap_state == "started":
        return "swap_asked"
    if staging_of(batch) is None:
        return None
    return "staged" if batch.state in ("committed", "skipped_duplicate") else "staging"


def overwrite_of(batch: Batch) -> OverwritePublic | None:
    step = overwrite_step(batch)
    if step is None:
        return None
    staged = batch.rows if batch.rows is not None else batch.expected_rows
    return OverwritePublic(
        step=step,
        staging_table=staging_of(batch),
        scope=batch.swap_scope,
        job_id=batch.swap_job_id,
        attempt=batch.swap_attempt,
        rows_inserted=batch.swap_staged_rows if batch.swap_state is not None else staged,
        rows_replaced=batch.swap_rows_replaced,
        partitions=batch.swap_partitions,
        partition_count=batch.swap_partition_count,
        swap_started_at=batch.swap_started_at,
        swapped_at=batch.swapped_at,
    )
