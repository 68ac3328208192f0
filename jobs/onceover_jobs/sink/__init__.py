"""The Onceover sink: a PySpark data source (format ``onceover``) that writes into
BigQuery through the Storage Write API exactly once. Read top to bottom:

1. :mod:`onceover_jobs.sink.datasource`  options and schema checked on the driver; the writers
2. :mod:`onceover_jobs.sink.protocol.task`        a task stages its rows in a stream (executor)
3. :mod:`onceover_jobs.sink.wire.appender`    offsets and the retry policy (invariant 1)
4. :mod:`onceover_jobs.sink.wire.requests`    requests under the size cap (invariant 2)
5. :mod:`onceover_jobs.sink.protocol.committer`   ledger → BatchCommit → ledger (invariants 3-5)
6. :mod:`onceover_jobs.sink.ledger.records`      the durable record of intents and commits (its
   files: :mod:`onceover.ledger_files`, shared with the control plane)
7. :mod:`onceover_jobs.sink.rows.dead_letter` rows BigQuery refuses: named, or set aside (invariant
9)
"""
