"""Spark's offsets log, read to tell a replayed micro-batch from new data under an old number.

Spark writes ``<checkpointLocation>/offsets/<batch id>`` before it runs a micro-batch,
and when it runs that batch again (after a crash) it reads the same entry back. Each
ledger record of a streaming batch keeps a fingerprint of its entry. A batch id the
ledger knows, from an entry it does not, means the checkpoint was reset: Spark's
``offsets/`` and ``commits/`` deleted while the ledger stayed. Those batch ids then name
new data, and skipping them as replays would lose it, while writing them could write
rows the table already holds: the sink refuses, before any row is written, and says why.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from onceover.ledger_files import read_summary
from onceover.ledger_store import StoreLike, open_store
from onceover_jobs.sink.errors import CheckpointResetError

if TYPE_CHECKING:
    from onceover.ledger_files import BatchRecord
    from onceover_jobs.sink.ledger.records import Ledger


def _entry(checkpoint: StoreLike, batch_id: int) -> bytes | None:
    """The offsets log's entry of ``batch_id``, wherever the checkpoint is (a disk or a
    bucket: Spark's checkpoint files are plain files or objects)."""
    found = open_store(checkpoint).read(f"offsets/{batch_id}")
    return None if found is None else found.data


def fingerprint(checkpoint: StoreLike, batch_id: int) -> str | None:
    """SHA-256 of the offsets log entry of ``batch_id``; None when Spark has none (yet, or
    no more: it keeps the last hundred)."""
    entry = _entry(checkpoint, batch_id)
    return None if entry is None else hashlib.sha256(entry).hexdigest()


def source_offsets(checkpoint: StoreLike, batch_id: int) -> tuple[str, ...] | None:
    """The offsets of each source in the entry of ``batch_id``, as Spark wrote them (one
    JSON text a source, after the version and metadata lines); None when Spark has none."""
    entry = _entry(checkpoint, batch_id)
    return None if entry is None else tuple(entry.decode().splitlines()[2:])


def latest_batch(checkpoint: StoreLike) -> int | None:
    """The highest batch id in the offsets log, None when it is empty or absent. Spark
    keeps its newest ``minBatchesToRetain`` entries: the listing stays that small."""
    names = open_store(checkpoint).list("offsets").files
    return max((int(name) for name in names if name.isdigit()), default=None)


_checked_through: dict[tuple[str, str, str], int] = {}
"""The batch id each (ledger, checkpoint, query) was last found not reset at, in this
process. Spark plans a running query's micro-batches in long-lived Python workers, so a
worker that checked batch ``b`` and is asked about ``b`` or ``b + 1`` is watching the
query run on. A reset since would make Spark plan a batch id the ledger already holds:
its record then names another offsets entry, or its number was pruned already; both are
seen by looking at that batch alone."""


def check_not_reset(ledger: Ledger, checkpoint: StoreLike) -> None:
    """Raise :class:`CheckpointResetError` when the ledger holds batches that Spark's
    offsets log no longer accounts for; checked before a query writes anything.

    Spark logs the batch it plans (the log's newest entry, ``latest``) before it asks the
    sink for a writer. Where this process last checked ``latest - 1`` or ``latest`` of
    this query, only that batch is looked at (:func:`_check_next_batch`): a few requests
    a micro-batch however many batches the ledger holds. Anywhere else (a query's first
    batch in this process, or Spark's log behind or beyond what this process saw: a
    restart, a reset, a checkpoint rewound) the whole ledger is compared with the log
    (:func:`_check_whole_ledger`), once."""
    url = open_store(checkpoint).url
    memo = (ledger.where, url, ledger.query_id)
    latest = latest_batch(checkpoint)
    seen = _checked_through.get(memo)
    if latest is not None and seen is not None and latest - 1 <= seen <= latest:
        _check_next_batch(ledger, checkpoint, latest)
    else:
        _check_whole_ledger(ledger, checkpoint, latest)
    if latest is not None:
        _checked_through[memo] = latest


def _check_next_batch(ledger: Ledger, checkpoint: StoreLike, latest: int) -> None:
    """Batch ``latest`` alone: a record of it must come from the entry Spark logged now
    (else it names other data than the ledger's), and no batch at or above it may be
    pruned already (the ledger went past it before Spark's log was rewound: the whole
    ledger is compared then, which names how far it went)."""
    pruned = read_summary(ledger.store, ledger.directory)
    if pruned is not None and pruned.highest is not None and pruned.highest >= latest:
        _check_whole_ledger(ledger, checkpoint, latest)
        return
    record = ledger.batch(latest)
    if record is not None:
        check_same_offsets(record, ledger, checkpoint)


def _check_whole_ledger(ledger: Ledger, checkpoint: StoreLike, latest: int | None) -> None:
    """Every record the ledger holds against Spark's log.

    A pruned ledger (:mod:`onceover_jobs.sink.ledger.retention`) keeps only its newest batches,
    as Spark keeps only its newest entries: how far it went is the newest of its records
    and of the batches its summary says were pruned, so a reset is seen even where every
    record is gone, and the records it kept are compared with Spark's entries as before."""
    records = [r for r in ledger.batches() if r.batch_id is not None]
    pruned = read_summary(ledger.store, ledger.directory)
    numbered = [r.batch_id for r in records if r.batch_id is not None]
    if pruned is not None and pruned.highest is not None:
        numbered.append(pruned.highest)
    if not numbered:
        return
    newest = max(numbered)
    if latest is None or latest < newest:
        have = "no entries" if latest is None else f"entries up to batch {latest}"
        raise CheckpointResetError(
            _explain(ledger, checkpoint, newest, f"its offsets log has {have}")
        )
    for record in records:
        check_same_offsets(record, ledger, checkpoint)


def check_same_offsets(record: BatchRecord, ledger: Ledger, checkpoint: StoreLike) -> None:
    """Raise when ``record`` was committed from another offsets entry than Spark's now."""
    if record.batch_id is None or record.source_offsets is None:
        return  # not a streaming batch, or recorded before fingerprints were kept
    now = fingerprint(checkpoint, record.batch_id)
    if now is not None and now != record.source_offsets:
        newest = max((r.batch_id for r in ledger.batches() if r.batch_id is not None), default=0)
        raise CheckpointResetError(
            _explain(
                ledger,
                checkpoint,
                newest,
                f"offsets/{record.batch_id} is not the entry batch {record.batch_id} was "
                "written from",
            )
        )


def _explain(ledger: Ledger, checkpoint: StoreLike, newest: int, what: str) -> str:
    return (
        f"the checkpoint {open_store(checkpoint).url} was reset: the ledger ({ledger.where}) holds "
        f"batches up to {newest} of query {ledger.query_id}, but {what}. Its batch ids now "
        "name new data, which the sink would either skip as replays (losing it) or write "
        "over rows the table already holds. Start the query on a new checkpointLocation "
        "(its ledger starts empty), after reconciling what the table already holds from "
        "this one; nothing was written"
    )
