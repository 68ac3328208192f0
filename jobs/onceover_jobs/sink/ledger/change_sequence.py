"""A CDC write's sequence base: the first section of the sequence numbers the sink gives
its rows (onceover_jobs.sink.rows.change_capture), the same on every attempt.

One file per write and batch, ``partitions/<batch>/changes.json`` in the write target's
folder (beside the batch's partition records, pruned with them by
onceover_jobs.sink.ledger.retention), created exclusively by the first task that needs
it and read by every other task, its retries and a replay of the batch: so they all
number the batch's rows alike. Its value
is the microseconds since the epoch when it was made, and at least one more than the
previous batch's (a micro-batch's first task may run on an executor whose clock is
behind the one of the batch before): a later batch outranks an earlier one, a later
run (with a new checkpoint or run id) one before it, as far as the executors' clocks
agree (to less than the time between the two runs).

Durable (fsynced) before a row is numbered by it: a base lost to a crash would number a
replay's rows anew, after changes that came later.
"""

from __future__ import annotations

import time

from onceover.ledger_files import batch_name, read_payload
from onceover.ledger_store import join
from onceover_jobs.sink.errors import LedgerError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_exclusively

FILE = "changes.json"


def sequence_key(ledger: Ledger, batch_id: int | None) -> str:
    return join(ledger.directory, "partitions", batch_name(batch_id), FILE)


def sequence_base(ledger: Ledger, batch_id: int | None) -> int:
    """The batch's sequence base: the one recorded, else one recorded now."""
    found = _read(ledger, batch_id)
    if found is not None:
        return found
    base = time.time_ns() // 1000
    if batch_id is not None and batch_id > 0:
        before = _read(ledger, batch_id - 1)
        if before is not None:
            base = max(base, before + 1)
    if write_exclusively(ledger.store, sequence_key(ledger, batch_id), {"base": base}):
        return base
    won = _read(ledger, batch_id)  # another task of the batch recorded one first
    if won is None:
        raise LedgerError(
            f"{ledger.store.where(sequence_key(ledger, batch_id))}: the sequence base was "
            "taken but cannot be read"
        )
    return won


def _read(ledger: Ledger, batch_id: int | None) -> int | None:
    key = sequence_key(ledger, batch_id)
    payload = read_payload(ledger.store, key)
    if payload is None:
        return None
    base = payload.get("base")
    if not isinstance(base, int) or base < 0:
        raise LedgerError(f"{ledger.store.where(key)}: no sequence base in {payload!r}")
    return base
