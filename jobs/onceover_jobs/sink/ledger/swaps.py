"""The ledger's record of an overwrite's swap: which transaction replaces the table's rows,
and whether it has.

One record per overwrite write, beside its batch record (``swap-<batch>.json``): written
``swapping`` before the swap's job is asked for, ``swapped`` once BigQuery says it is
done. A restart reads it: ``swapping`` asks for the same job again (its id is fixed:
:mod:`onceover_jobs.sink.table.swap_job`), so it finds the first one's outcome rather
than running a second; ``swapped`` means the write is done. It only moves forward.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Literal

from onceover.ledger_files import batch_name, decode_payload, encode_payload, read_payload
from onceover.ledger_store import join
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_replacing

SwapState = Literal["swapping", "swapped"]


@dataclass(frozen=True)
class SwapRecord:
    state: SwapState
    target: str
    staging: str
    """The table the staged rows are in (where the committed batch's streams were)."""
    scope: str
    """What the swap replaces, in words (OverwriteScope.describe)."""
    job_id: str
    attempt: int
    started_at: str
    swapped_at: str | None = None
    staged_rows: int = 0
    """The rows inserted: every row staged."""
    rows_replaced: int | None = None
    """The target's rows in the scope, counted as the first attempt began."""
    partitions: list[str] | None = None
    """The partitions replaced (the first 100), None for the whole table."""
    partition_count: int | None = None

    @property
    def swapped(self) -> bool:
        return self.state == "swapped"


def swap_key(ledger: Ledger, batch_id: int | None) -> str:
    return join(ledger.directory, f"swap-{batch_name(batch_id)}.json")


def read_swap(ledger: Ledger, batch_id: int | None) -> SwapRecord | None:
    payload = read_payload(ledger.store, swap_key(ledger, batch_id))
    return None if payload is None else SwapRecord(**payload)


def begin_swap(
    ledger: Ledger, batch_id: int | None, record: SwapRecord, *, replacing: SwapRecord | None
) -> None:
    """Record the attempt about to be asked for: the first created exclusively, a later
    one (after a failed job) by compare-and-swap over the attempt it follows, so two
    drivers of one run never both start a swap."""
    store, key = ledger.store, swap_key(ledger, batch_id)
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
    if found is None or SwapRecord(**decode_payload(found.data, store.where(key))) != replacing:
        raise raced
    if store.swap(key, data, found.version) is None:
        raise raced


def mark_swapped(
    ledger: Ledger, batch_id: int | None, record: SwapRecord, *, at: str
) -> SwapRecord:
    done = replace(record, state="swapped", swapped_at=at)
    write_replacing(ledger.store, swap_key(ledger, batch_id), asdict(done))
    return done
