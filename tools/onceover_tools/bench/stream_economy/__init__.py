"""Write streams a user's streaming query creates, and what each mode costs a micro-batch,
side by side; then a soak of the query as ``writeStream`` runs it by default.

    .venv/bin/python -m onceover_tools.bench.stream_economy [--batches 60] [--segment 5]
        [--soak-minutes 20] [--out DIR] [--rows-per-batch 200] [--sample-seconds 30]
        [--warmup-batches 2]

The query is a user's: a directory of JSON files read with ``maxFilesPerTrigger=1`` (one
file of ``--rows-per-batch`` rows per micro-batch), ``repartition(8, "event_id")``, a
``processingTime`` trigger of 1 second, ``writeStream.format("onceover")`` with the table
and a checkpoint. Spark ``local[2]``; the local BigQuery in a child process of its own, so
the driver's figures in the soak are the driver's alone.

1. **The modes, interleaved** (``pending``, ``buffered``, ``committed``, ``default``):
   one query per mode into a fresh table of its own, all four started together and
   running to the end, but only one ever has a file to read, so only one runs a batch
   at a time (the others' triggers find nothing new and run no batch). Round 0 gives
   each mode its first file in turn; then each round gives each mode ``--segment``
   files (default 5) in turn and waits for its batches before the next mode's files go
   in, the order rotated by one mode each round, until every mode has run
   ``--batches``. So every mode's batches are spread over the whole run in short
   segments, each beside the others', and a spell of load from other work on the
   machine falls on every mode alike instead of on whichever happened to run then (the
   modes ran one after another before, and the slowest was whichever ran while the
   machine was busiest).
2. **Streams**: what the local BigQuery lists for each table at ``/admin/streams``
   (every stream ever created; ``_default`` is never created). Those by the end of a
   mode's first batch (round 0) are counted apart; the rest are the steady state's,
   extrapolated to an hour at the trigger period the mode kept: the mean start-to-start
   time of its consecutive batches within a round, times its steady batches. Target: at
   most 2 streams per partition an hour (16 for 8) for the modes that keep their
   streams (``buffered``, ``committed``) and for the soak.
3. **Per micro-batch**: Spark's ``durationMs["addBatch"]`` of each batch (the sink's time
   for it: the batch's plan runs into the sink's tasks, and when it returns the rows are
   visible in every mode), p50 and p95 over every batch but the first, pooled over the
   rounds: every mode's batches sampled the same stretches of the run, so their
   quantiles compare. The ratios of ``pending``, ``buffered`` and ``committed`` to
   ``default`` (target: at most 1.2). As a check, the paired ratio: in each round, a
   mode's median over ``default``'s median in that same round, and the median of those
   over the rounds.
4. **The floor**: the same query into Spark's hand-off (``format("onceover-handoff")``,
   :mod:`onceover_tools.bench.handoff`: a Python data source whose writers count the rows
   and write nothing), run interleaved with the modes as one more of them. Each mode's
   overhead per micro-batch over it: the mode's p50 (p95) ``addBatch`` less the floor's
   p50 (p95), in ms; and paired, the median over the rounds of the mode's round median
   less the floor's. What a micro-batch costs in each mode beyond what Spark costs any
   Python sink.
5. **The soak** (``--soak-minutes``, 0 skips it): the query with no ``mode`` option (so
   ``writeStream``'s default, ``buffered``) for that long, a file put in whenever fewer
   than two wait, sampling every ``--sample-seconds``: the driver's Python process (RSS,
   threads), the Spark JVM (RSS, threads), the Python workers under it (count, RSS and
   threads summed), the TCP connections of that process tree to the local BigQuery's gRPC
   port, and the streams created so far. First and last sample and the least-squares
   slope, per hour.

Every query's rows are counted in BigQuery (``COUNT(*)``, ``COUNT(DISTINCT event_id)``)
before its figures are kept: exact for the exactly-once modes (and the soak); ``default``
is at least once, so every key once and no row missing. The floor's rows are counted as
its writers were handed them, every batch's once. Figures, not assertions: a missed
target is printed as missed. Exits 1 only when a figure could not be taken (a query that
failed, rows missing or repeated in an exactly-once mode).

The phases, a module each: :mod:`~.session` (the Spark session and the local BigQuery a
query runs on, its table and its files), :mod:`~.interleaved` (the modes' runs and the
warm-up), :mod:`~.counting` (the counting in BigQuery), :mod:`~.soak`, :mod:`~.measure`
(one run set up and measured, in this process or a fresh one) and :mod:`~.report` (what
it prints); the figures they take in :mod:`~.figures` and :mod:`~.economy`, read through
:mod:`~.progress` and :mod:`~.process_tree`; the query's shape and the run's defaults in
:mod:`~.plan`. ``__main__`` is the command line.
"""

from __future__ import annotations

from onceover_tools.bench.stream_economy.economy import Economy, Goal, default_mode, goals
from onceover_tools.bench.stream_economy.figures import (
    BatchFigure,
    QueryFigure,
    Sample,
    Soak,
    StreamCount,
)
from onceover_tools.bench.stream_economy.interleaved import schedule
from onceover_tools.bench.stream_economy.measure import measure, measure_in_child
from onceover_tools.bench.stream_economy.plan import BATCHES, MODES, PARTITIONS
from onceover_tools.bench.stream_economy.report import interleaving, markdown, soak_table, table

__all__ = [
    "BATCHES",
    "MODES",
    "PARTITIONS",
    "BatchFigure",
    "Economy",
    "Goal",
    "QueryFigure",
    "Sample",
    "Soak",
    "StreamCount",
    "default_mode",
    "goals",
    "interleaving",
    "markdown",
    "measure",
    "measure_in_child",
    "schedule",
    "soak_table",
    "table",
]
