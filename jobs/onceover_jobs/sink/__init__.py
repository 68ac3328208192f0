"""The Onceover sink: a PySpark data source (format ``onceover``) that writes into
BigQuery through the Storage Write API exactly once.

The exactly-once protocol, read top to bottom:

1. ``onceover_jobs.sink.datasource``         options, table and schema checked on the
   driver; the writers Spark calls (entry point: ``register``)
2. ``onceover_jobs.sink.ledger.identity``    which write a batch is: the key of every
   ledger record (query and batch; the call's ordinal; the run)
3. ``onceover_jobs.sink.protocol.resolve``   a task works out its write's identity
4. ``onceover_jobs.sink.protocol.task``      a task's first phase: already committed?
   else its mode stages the rows (executor)
5. ``onceover_jobs.sink.protocol.committer`` the driver's second phase: ledger intent →
   the mode publishes → ledger mark; a replay settles what it finds (invariants 3-6)
6. ``onceover_jobs.sink.protocol.overwrite`` ``mode("overwrite")``: the rows staged
   exactly once (5), then swapped in by one transaction whose job id the ledger holds

Each write mode, behind one interface (what a mode *is*: ``onceover.modes``):

7. ``onceover_jobs.sink.modes.base``         the interface: write, prepare, publish,
   settle, what an abort leaves
8. ``onceover_jobs.sink.modes.staging``      what every mode's task does with a stream
9. ``onceover_jobs.sink.modes.row_format``   Arrow, or proto once BigQuery refused Arrow
10. ``onceover_jobs.sink.modes.pending``     PENDING streams, one BatchCommit a batch
11. ``onceover_jobs.sink.modes.buffered``    a BUFFERED stream a partition, flushed a batch
12. ``onceover_jobs.sink.modes.committed``   a COMMITTED stream a partition, visible per
    append, retries found again in the ledger
13. ``onceover_jobs.sink.modes.default``     ``_default``, at least once (the baseline)

Below them, each a folder with its own reading order: ``reporting`` (events, the run's
own events, OpenLineage), ``job`` (what the driver ships to every task), ``ledger`` (the
durable record: intents and marks, leases, slots, Spark's offsets log), ``rows`` (schema,
proto rows, stamp, dead letters: invariant 9), ``wire`` (the Storage Write API: offsets
and retries, requests under the cap, unary calls: invariants 1-2, 8), and at the bottom
``errors`` (one exception tree), ``failpoints`` and ``driver``. Imports go only downward
(``tests/project/test_layout.py``). ``onceover_jobs.sink.claim`` and ``onceover_jobs.sink.settle``
are the other entry points: claim a checkpoint before ``start()``, settle an intent by
hand.
"""
