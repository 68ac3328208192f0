"""``format("onceover")`` in any PySpark 4 session, once the package is installed.

PySpark 4 looks, on the first use of a Python data source, for installed top-level
modules named ``pyspark_*`` that expose ``DefaultSource`` (a ``DataSource``), and
registers each under its ``name()`` (``pyspark/sql/worker/lookup_data_sources.py``).
This module is that entry for Onceover's sink, so a script needs no import from this
project::

    df.write.format("onceover").option("table", "p.d.t").option("run_id", "day-1").save()

A session started before the package was installed does not look again: call
``onceover_jobs.sink.datasource.register(spark)`` there.
"""

from onceover_jobs.sink.datasource import OnceoverDataSource as DefaultSource

__all__ = ["DefaultSource"]
