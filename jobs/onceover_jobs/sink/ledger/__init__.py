"""The durable record in the checkpoint (or the ``ledger`` option's path): what the sink
promised and did, so a replay, a retry or a second driver never writes a batch twice.

:mod:`.writes` (atomic, exclusive and compare-and-swap writes of one file) →
:mod:`.identity` (which write a record belongs to) → :mod:`.records` (a write's batch
records: intent, commit started, committed; a partition's progress) → :mod:`.leases`
(one driver at a time; the probe every executor must see) → :mod:`.slots` (the stream a
partition keeps from batch to batch) → :mod:`.offsets_log` (the batch's entry in Spark's
own offsets log) → :mod:`.retention` (old batches pruned in step with Spark's logs) →
:mod:`.swaps` (an overwrite's swap: asked for, done). The
files' layout, shared with the control plane, is :mod:`onceover.ledger_files`.
"""
