"""Ledger retention: old batches pruned in step with Spark's own logs, their totals kept.

The ledger (:mod:`onceover_jobs.sink.ledger.records`) writes a record per batch, and in committed
mode a ``partitions/<batch>/`` directory and (foreachBatch) a ``calls/<batch>/`` registry, and would
keep them forever (the layout: :mod:`onceover.ledger_files`). Spark keeps only the last
``spark.sql.streaming.minBatchesToRetain`` (default 100) entries of its offsets and commits logs,
and only ever replays the newest batch of those (the one it planned and did not mark done). So after
batch ``newest`` of a write target is committed, the batches below ``cutoff = newest - keep + 1``
can never be written again, and :func:`prune` removes what the ledger holds of them: each one's
record (committed ones only), its ``partitions/<b>/`` and its ``calls/<b>/``; it keeps the summary
``pruned.json`` instead (:class:`onceover.ledger_files.PrunedSummary`: how many batches and rows
went, and ``through``, below which every batch id was pruned, held or never recorded).

Never an intent (an unsettled batch stays until it is settled: it is *held*), never the
batch-write record (``batch_id`` None), never anything at or above the cutoff, and never
the records of the layout before write identities (``<root>/<scope>/batch-<b>.json``,
read-only since then and finite). The summary's ``highest`` (the highest batch id
pruned) lets :func:`onceover_jobs.sink.ledger.offsets_log.check_not_reset` still know how far
the ledger went even when every record of a write target is gone.

Crash safety, in this order:

1. The new summary is written (atomically, ``write_replacing``) *before* any file goes.
   From then on a reader counts those batches from the summary and ignores their
   records (a record below ``through`` and not held is counted there), so a crash that
   leaves some of them behind never counts one twice, and a repeated prune starts at
   ``through``: nothing is counted twice either.
2. For each batch, ascending: ``partitions/<b>/`` and ``calls/<b>/`` go *before* the
   record. As long as the record is there the batch reads as committed, which is what
   makes a (never expected) replay of it a no-op: a task skips a committed batch before
   it looks at its progress, and the driver skips it before it commits. A crash leaves
   at worst a committed record without its progress: a ledger every reader handles.
3. The next prune checks whether the last record of ``removing`` is still there (one
   ``stat``, or an object's metadata); if so the last prune was interrupted and it
   removes them again (every step tolerates what is already gone).

Cost is bounded: a prune reads one small summary and looks up one key; only when
``every`` batches are due does it read their records (at most ``max_step`` batch ids a
call, from ``through`` on) and write the summary once. The directory is listed only
until the first summary is written, to find where its batch ids start: while it holds
fewer than ``keep + every`` records, or once for a large ledger from before retention.

Totals (:class:`onceover.ledger_files.ScopeTotals`) are read by the contract: the
summaries plus the records they do not cover.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from onceover.ledger_files import (
    PrunedSummary,
    read_record,
    read_summary,
    summary_key,
)
from onceover.ledger_store import join
from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.ledger.records import Ledger
from onceover_jobs.sink.ledger.writes import write_replacing

DEFAULT_KEEP = 100
"""Spark's default ``spark.sql.streaming.minBatchesToRetain``."""
KEEP_ENV = "ONCEOVER_LEDGER_KEEP_BATCHES"
"""Overrides the keep count the sink passes (from Spark's minBatchesToRetain)."""
SPARK_KEEP_CONF = "spark.sql.streaming.minBatchesToRetain"
PRUNE_EVERY = 10
"""Batches due before a prune does any work: one summary write per ten commits."""
MAX_STEP = 1000
"""Batch ids a prune examines at most: a huge ledger from before retention is pruned
over many commits, never in one long pause of one."""


def how_many_to_keep(
    spark_conf_value: str | None = None, *, environ: Mapping[str, str] | None = None
) -> int:
    """The batches to keep: ``$ONCEOVER_LEDGER_KEEP_BATCHES`` when set (the operator's
    override), else ``spark_conf_value`` (the query's
    ``spark.sql.streaming.minBatchesToRetain``, which the sink passes), else 100."""
    env = os.environ if environ is None else environ
    for source, text in ((KEEP_ENV, env.get(KEEP_ENV)), (SPARK_KEEP_CONF, spark_conf_value)):
        if text is None or not text.strip():
            continue
        try:
            value = int(text.strip())
        except ValueError:
            raise SinkOptionError(source, f"{text!r} is not a whole number of batches") from None
        if value < 1:
            # Spark itself refuses 0; the batch just committed must always be kept (it is
            # the one Spark replays after a crash).
            raise SinkOptionError(source, f"{value} batches: at least 1 must be kept")
        return value
    return DEFAULT_KEEP


@dataclass(frozen=True)
class PruneResult:
    cutoff: int
    """Batches below this may be pruned (``newest_batch - keep + 1``)."""
    pruned: tuple[int, ...] = ()
    """Committed batches counted into the summary and removed by this call."""
    held: tuple[int, ...] = ()
    """Intents below the cutoff, kept until settled."""
    resumed: tuple[int, ...] = ()
    """An interrupted earlier prune's batches whose removal this call finished."""
    through: int | None = None
    """The summary's ``through`` after this call; None while there is none."""


# -- pruning ----------------------------------------------------------------------------


def prune(
    ledger: Ledger,
    *,
    newest_batch: int,
    keep: int,
    every: int = PRUNE_EVERY,
    max_step: int = MAX_STEP,
) -> PruneResult:
    """After ``newest_batch`` of ``ledger`` is committed: remove what the ledger holds of
    its committed batches below ``newest_batch - keep + 1`` (see the module's rules).

    ``every``: do nothing until at least this many batches are due (the summary is
    written once per step). ``max_step``: examine at most this many batch ids a call."""
    if keep < 1 or every < 1 or max_step < 1:
        raise ValueError(
            f"keep, every and max_step must be at least 1: {keep}, {every}, {max_step}"
        )
    cutoff = newest_batch - keep + 1
    summary = read_summary(ledger.store, ledger.directory)
    written = None if summary is None else summary.through
    resumed: tuple[int, ...] = ()
    if summary is not None and _interrupted(ledger, summary):
        _remove_batches(ledger, summary.removing)
        resumed = summary.removing
    if summary is None:
        if cutoff <= 0:
            return PruneResult(cutoff, resumed=resumed)
        # The first time only (no summary yet): where this target's batch ids start. A
        # ledger below the cutoff has nothing to list but its few newest records.
        start = _lowest_batch(ledger)
        if start is None or start >= cutoff:
            return PruneResult(cutoff, resumed=resumed)
        summary = PrunedSummary(through=start)
    if cutoff - summary.through < every:
        return PruneResult(cutoff, held=summary.held, resumed=resumed, through=written)

    end = min(cutoff, summary.through + max_step)
    pruned: list[int] = []
    held: list[int] = []
    rows = 0
    for batch_id in sorted({*summary.held, *range(summary.through, end)}):
        record = read_record(ledger.store, _record_key(ledger, batch_id))
        if record is None or record.batch_id != batch_id:
            continue  # never recorded here (a write that skipped this batch)
        if not record.committed:
            held.append(batch_id)  # an intent stays until it is settled
            continue
        pruned.append(batch_id)
        rows += record.expected_rows
    highest = max([*pruned, *([] if summary.highest is None else [summary.highest])], default=None)
    after = PrunedSummary(
        batches=summary.batches + len(pruned),
        rows=summary.rows + rows,
        through=end,
        highest=highest,
        held=tuple(held),
        removing=tuple(pruned),
        pruned_at=round(time.time(), 3),
    )
    # The summary first: from here on the pruned batches are counted by it, and their
    # records (until they are gone) by no one.
    write_replacing(ledger.store, summary_key(ledger.directory), asdict(after))
    _remove_batches(ledger, after.removing)
    return PruneResult(cutoff, tuple(pruned), tuple(held), resumed, after.through)


def _record_key(ledger: Ledger, batch_id: int) -> str:
    # Mirrors Ledger.batch_key for a numbered batch (the current layout only).
    return join(ledger.directory, f"batch-{batch_id}.json")


def _interrupted(ledger: Ledger, summary: PrunedSummary) -> bool:
    """Whether the last prune stopped before removing all it counted: records go in
    ascending order, each after its directories, and the directory is synced at the end,
    so the last one still there means the step did not finish."""
    return bool(summary.removing) and ledger.store.exists(_record_key(ledger, summary.removing[-1]))


def _lowest_batch(ledger: Ledger) -> int | None:
    lowest: int | None = None
    for name in ledger.store.list(ledger.directory).files:
        number = _record_number(name)
        if number is not None and (lowest is None or number < lowest):
            lowest = number
    return lowest


def _record_number(name: str) -> int | None:
    if not (name.startswith("batch-") and name.endswith(".json")):
        return None
    text = name[len("batch-") : -len(".json")]
    return int(text) if text.isdigit() else None


def _remove_batches(ledger: Ledger, batch_ids: Iterable[int]) -> None:
    ids = sorted(batch_ids)
    if not ids:
        return
    siblings = _sibling_directories(ledger)
    store = ledger.store
    for batch_id in ids:
        store.delete_tree(join(ledger.directory, "partitions", str(batch_id)))
        if not _unsettled_elsewhere(ledger, siblings, batch_id):
            store.delete_tree(join(ledger.table_directory, "calls", str(batch_id)))
        store.delete(_record_key(ledger, batch_id))
    # Durable before the next prune trusts "the last record is gone" to mean all are.
    store.settle(ledger.directory)


def _sibling_directories(ledger: Ledger) -> list[str]:
    """The other write targets of the table: a foreachBatch call's registry
    (``calls/<b>/``) is shared by every write of the call to the table."""
    writes = join(ledger.table_directory, "writes")
    found = [ledger.table_directory]
    found += [join(writes, name) for name in ledger.store.list(writes).folders]
    return [d for d in found if d != ledger.directory]


def _unsettled_elsewhere(ledger: Ledger, siblings: list[str], batch_id: int) -> bool:
    """Whether another write of this batch holds an intent: its registry stays with it
    (it is what would give a replay of that write its ordinal back)."""
    for directory in siblings:
        record = read_record(ledger.store, join(directory, f"batch-{batch_id}.json"))
        if record is not None and not record.committed:
            return True
    return False
