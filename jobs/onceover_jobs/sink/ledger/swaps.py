"""Writing the ledger's record of an overwrite's swap: which transaction replaces the
table's rows, and whether it has.

One record per overwrite write, beside its batch record (``swap-<batch>.json``; the
record and its reading are the contract's, :class:`onceover.ledger_files.SwapRecord`,
as the control plane reads it too): written ``swapping`` before the swap's job is asked
for, ``swapped`` once BigQuery says it is done. A restart reads it: ``swapping`` asks for
the same job again (its id is fixed: :mod:`onceover_jobs.sink.table.swap_job`), so it
finds the first one's outcome rather than running a second; ``swapped`` means the write
is done. It only moves forward.
"""

from __future__ import annotations

from dataclasses import asdict, replace

from onceover.ledger_files import SwapRecord, decode_payload, encode_payload, swap_key, swap_of
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_replacing


def begin_swap(
    ledger: Ledger, batch_id: int | None, record: SwapRecord, *, replacing: SwapRecord | None
) -> None:
    """Record the attempt about to be asked for: the first created exclusively, a later
    one (after a failed job) by compare-and-swap over the attempt it follows, so two
    drivers of one run never both start a swap."""
    store, key = ledger.store, swap_key(ledger.directory, batch_id)
    data = encode_payload(asdict(record))
    raced = LedgerError(
        f"{store.where(key)}: another driver started this overwrite's swap as this one was "
        "about to; one run must have one driver at a time"
    )
    if replacing is None:
        if store.create(key, data) is None:
            raise raced
        return
    if replacing.swapped:
        raise LedgerError(f"{store.where(key)}: the swap is done; not starting another")
    found = store.read(key)
    where = store.where(key)
    if found is None or swap_of(decode_payload(found.data, where), where) != replacing:
        raise raced
    if store.swap(key, data, found.version) is None:
        raise raced


def mark_swapped(
    ledger: Ledger, batch_id: int | None, record: SwapRecord, *, at: str
) -> SwapRecord:
    done = replace(record, state="swapped", swapped_at=at)
    write_replacing(ledger.store, swap_key(ledger.directory, batch_id), asdict(done))
    return done
