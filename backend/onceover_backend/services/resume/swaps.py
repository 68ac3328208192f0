"""What a resume does with an overwrite the ledger holds committed to its staging table,
by how far its swap got (its swap record, :class:`onceover.ledger_files.SwapRecord`). The
resumed job does it (``onceover_jobs.sink.protocol.overwrite``); this only says it.

=============  =====================================================================
step           a resume
=============  =====================================================================
``staged``     swaps the rows in: one transaction, under a job id it records first
``swap_asked`` asks for the recorded job again: BigQuery runs a job id once, so it
               finds the first one's outcome; a failed one rolled back, and the swap
               is tried again under the next id
``swapped``    changes nothing
=============  =====================================================================
"""

from __future__ import annotations

from onceover_backend.models import PendingSwapPublic
from onceover_backend.services.resume.checkpoint import StagedOverwrite


def pending_swap(staged: StagedOverwrite) -> PendingSwapPublic:
    record, swap = staged.record, staged.swap
    rows = f"{record.expected_rows:,} rows"
    if swap is None:
        step, job_id = "staged", None
        will = (
            "swaps the staged rows in without staging them again: its "
            f"{rows} are committed to {staged.staging} and no swap was recorded, so "
            f"{record.table} holds its old rows until the swap's one transaction"
        )
    elif not swap.swapped:
        step, job_id = "swap_asked", swap.job_id
        will = (
            f"asks BigQuery for the same swap job again (it runs once): job {swap.job_id} "
            f"was asked for at {swap.started_at}; if it failed, its transaction rolled back "
            "(the old rows are whole) and the swap is tried again under the next job id"
        )
    else:
        step, job_id = "swapped", swap.job_id
        will = (
            f"nothing: the rows were replaced (job {swap.job_id}, at {swap.swapped_at}); "
            "a run of the same write again changes nothing"
        )
    return PendingSwapPublic(
        query_id=record.query_id,
        batch_id=record.batch_id,
        table=record.table,
        write=record.write or None,
        staging_table=staged.staging,
        step=step,
        staged_rows=record.expected_rows,
        job_id=job_id,
        resume_will=will,
    )
