"""Reading one batch of a run: every record of it (one per table, query and write), each
with the receipt its first commit reported (commit time, source offsets, key checksum)."""

from __future__ import annotations

from typing import Final, Literal

from sqlmodel import Session, col, select

from onceover_backend.errors import InvalidParameterError, NotFoundError
from onceover_backend.models import BatchReceiptsPublic
from onceover_backend.services.reads.batch_view import batch_public
from onceover_backend.tables import Batch, Run

WRITE: Final = "write"
"""How a batch write (``batch_id`` null) is named in the path."""
MAX_BATCH_ID = 2**31 - 1
"""The largest batch id stored (a 32-bit column)."""


def parse_batch(text: str) -> int | None:
    """The batch id ``text`` names: a micro-batch number, or None for ``write``."""
    if text == WRITE:
        return None
    if not text.isascii() or not text.isdigit() or int(text) > MAX_BATCH_ID:
        raise InvalidParameterError(
            "batch",
            f"a micro-batch number (0 to {MAX_BATCH_ID}) or {WRITE!r} for a batch write",
            text,
            where="path",
        )
    return int(text)


def _order(batch: Batch) -> tuple[str, str, bool, int, str]:
    """By table, query, then write: none first, ordinals as numbers, then write ids."""
    write = batch.write or ""
    ordinal = int(write) if write.isdigit() else MAX_BATCH_ID + 1
    return (batch.table_id, batch.query_id, batch.write is not None, ordinal, write)


def get_batch(session: Session, run_id: str, batch: str) -> BatchReceiptsPublic:
    """Every record of batch ``batch`` (a number, or ``write``) of run ``run_id``."""
    batch_id = parse_batch(batch)
    if session.get(Run, run_id) is None:
        raise NotFoundError(f"no run {run_id!r}")
    query = select(Batch).where(Batch.run_id == run_id)
    if batch_id is None:
        query = query.where(col(Batch.batch_id).is_(None))
    else:
        query = query.where(Batch.batch_id == batch_id)
    records = sorted(session.exec(query), key=_order)
    if not records:
        what = "batch write" if batch_id is None else f"batch {batch_id}"
        raise NotFoundError(f"run {run_id!r} has no {what}")
    named: int | Literal["write"] = WRITE if batch_id is None else batch_id
    return BatchReceiptsPublic(
        run_id=run_id,
        batch=named,
        receipts=[batch_public(b) for b in records],
    )
