"""Spark's Python worker daemon, with the sink's imports done once, before it forks.

Spark forks every Python worker from a daemon process, and stops a worker that has been
idle for a minute. A fresh worker must import what the sink needs: pyarrow and
google-cloud-bigquery-storage, whose package also imports pandas wherever pandas is
installed (Onceover itself does not need pandas). So a write that came more than a
minute after the last one paid for those imports again, many times what the write itself
took, as would every micro-batch of a stream triggered less often than once a minute
(the figures: docs/journal/notes.md).

Imported here, before any fork, the task workers start with them loaded, and that write
costs much less. The rest is the data source's planning and commit workers, which Spark
forks from its own ``pyspark.daemon`` whatever this setting says. The commit no longer
imports the client library, pyarrow or pydantic (:mod:`onceover_jobs.sink.wire.write_api`);
the planning worker still imports google-cloud-bigquery for the table's schema.

:func:`onceover_jobs.spark.spark_session` sets ``spark.python.daemon.module`` to this module on a
local master; on a cluster, set it only where the executors' Python can import ``jobs``
(installed there, not only shipped with ``--py-files``), or the daemon cannot start.
"""

from __future__ import annotations

import sys
import traceback


def preload() -> None:
    """Import the sink's modules and what they need; a failure only costs the speed-up."""
    try:
        import google.cloud.bigquery_storage_v1  # noqa: F401
        import pyarrow  # noqa: F401

        import onceover_jobs.sink.datasource
        import onceover_jobs.sink.protocol.committer
        import onceover_jobs.sink.protocol.task
        import onceover_jobs.sink.wire.write_api  # noqa: F401
    except Exception:  # the daemon must start anyway: workers import what they need
        print("onceover: worker daemon could not preload the sink:", file=sys.stderr)
        traceback.print_exc()


if __name__ == "__main__":
    from pyspark import daemon

    preload()
    daemon.manager()
