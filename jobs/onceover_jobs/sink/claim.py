"""Claim a streaming query's checkpoint on the driver, before ``start()``.

The sink claims its query when Spark first asks it for a writer, and Spark asks only
once it has planned the micro-batch: the checkpoint's offsets log (and a file source's
own log) already holds the batch then. A second driver refused there (another that
still runs the query, :func:`onceover_jobs.sink.ledger.leases.claim_driver`) writes no row, but
the entry it left is the one the first driver writes at its next micro-batch, and Spark
stops the first on it ("Concurrent update to the log"). Claimed here, before the query
starts, the second driver is refused before Spark writes anything::

    register(spark)
    claim_checkpoint(spark, "/shared/checkpoints/usage")
    df.writeStream.format("onceover").option("checkpointLocation", "/shared/checkpoints/usage")...

A new checkpoint has no query id until Spark starts the query: nothing is claimed then,
and the sink claims the query at its first micro-batch as before.
"""

from __future__ import annotations

from typing import Any

from onceover.checkpoint_layout import ledger_root
from onceover.ledger_store import open_store
from onceover_jobs.sink.driver import owner_of
from onceover_jobs.sink.job.options import checkpoint_location as checked_checkpoint
from onceover_jobs.sink.job.sink_job import streaming_query_id
from onceover_jobs.sink.ledger.leases import DEFAULT_DRIVER_LEASE_S, claim_driver


def claim_checkpoint(
    spark: Any,
    checkpoint_location: str,
    *,
    lease_s: float = DEFAULT_DRIVER_LEASE_S,
    ledger: str | None = None,
) -> None:
    """Record ``spark``'s driver as the one running the query on ``checkpoint_location``,
    or raise :class:`~onceover_jobs.sink.errors.ConcurrentDriverError` naming the other
    driver (the same refusal, and the same ``driver.lease_s`` for a driver on another
    host, as the sink's). Call it before the query's ``start()``; ``ledger``: the sink's
    ``ledger`` option, where the query gives one."""
    checkpoint = checked_checkpoint(checkpoint_location)
    store = open_store(checkpoint)
    if not store.exists("metadata"):
        return  # a new query: no id to claim yet
    claim_driver(
        ledger if ledger is not None else ledger_root(checkpoint),
        streaming_query_id(store),
        f"the query on {checkpoint}",
        lease_s,
        owner=owner_of(_driver_jvm_pid(spark)),
    )


def _driver_jvm_pid(spark: Any) -> int:
    """The driver's JVM, which the sink's own claims name (its Python workers are the
    JVM's children; this process, a script's, may be its parent instead)."""
    try:
        jvm = spark.sparkContext._jvm
        return int(jvm.java.lang.ProcessHandle.current().pid())
    except Exception as exc:  # Spark Connect: no driver JVM in this process's reach
        raise TypeError(
            "claim_checkpoint needs a classic SparkSession, whose driver JVM this process "
            f"started or runs in ({type(exc).__name__}: {exc})"
        ) from exc
