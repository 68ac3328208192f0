"""In a task: which write this is (:mod:`onceover_jobs.sink.ledger.identity`), before a row is
written.

Every task of a write works it out from the job and Spark's local properties, and
they agree: the ordinal comes from the ledger's registry, which every executor sees
(a probe the driver left there proves it, for every task, before its first row).
"""

from __future__ import annotations

from onceover_jobs.sink.errors import SinkOptionError
from onceover_jobs.sink.job.sink_job import SinkJob
from onceover_jobs.sink.ledger.identity import SparkCall, WriteIdentity, write_id_name
from onceover_jobs.sink.ledger.leases import check_probe
from onceover_jobs.sink.ledger.records import Ledger


def resolve_write(job: SinkJob, call: SparkCall, where: str) -> SinkJob:
    """``job`` as the write this task belongs to; refuses a write without an identity."""
    options = job.options
    if job.probe is not None:
        check_probe(job.store, job.probe, where)
    if isinstance(job.write, WriteIdentity):  # the streaming sink: known on the driver
        return job
    if call.in_foreach_batch:
        assert call.query_id is not None
        kind, scope, batch_id = "foreachBatch", call.query_id, call.batch_id
    else:
        # Without a run_id the id is this save()'s own (made on the driver): its tasks'
        # retries write once, its commit is atomic, and a re-run is another run (the
        # connector's behaviour; the driver's log says how run_id makes it idempotent).
        kind, scope, batch_id = "batch", job.run_id, None
    if options.write_id is not None:
        write = write_id_name(options.write_id)
    else:
        write = str(_ordinal(job, call, scope, batch_id))
    identity = WriteIdentity(kind, scope, options.table, batch_id, write)  # type: ignore[arg-type]
    return job.resolved_as(identity)


def _ordinal(job: SinkJob, call: SparkCall, scope: str, batch_id: int | None) -> int:
    marker = call.marker()
    if marker is None or call.execution is None:
        raise SinkOptionError(
            "write_id",
            "Spark did not say which session and SQL execution this write belongs to, so "
            "its place among the run's writes to the table cannot be counted: give the "
            "write a write_id",
        )
    root = job.store
    table = Ledger(root, scope, job.options.table)

    def committed(k: int) -> bool:
        record = Ledger(root, scope, job.options.table, str(k)).batch(batch_id)
        return record is not None and record.committed

    return table.registry(batch_id, marker).ordinal(call.execution, committed)
