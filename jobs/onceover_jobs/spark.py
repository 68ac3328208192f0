"""How Onceover's jobs get a Spark session."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from onceover.job_env import SPARK_MASTER_ENV
from onceover.preflight import check_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"
WORKER_DAEMON = "onceover_jobs.worker_daemon"


def submitted() -> bool:
    """True when this driver was started by ``spark-submit`` (which passes a gateway port)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """A session on ``master`` (else ``$ONCEOVER_SPARK_MASTER``, else spark-submit's
    ``--master``, else ``local[2]``), in UTC.

    Checks Java first so a missing or old JDK is one clear line, not a JVM trace.
    """
    check_java()
    # Spark starts Python workers with PYSPARK_PYTHON (or python3 on PATH), not
    # with this interpreter; without it workers miss this environment's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    chosen = master or os.environ.get(SPARK_MASTER_ENV)
    if chosen is None and not submitted():
        chosen = DEFAULT_MASTER
    if chosen is not None:  # under spark-submit, its --master decides
        builder = builder.master(chosen)
    if chosen is not None and chosen.startswith("local"):
        # Workers forked with the sink already imported (see onceover_jobs/worker_daemon.py); on
        # a local master the workers' Python is this one, so the module is importable.
        builder = builder.config("spark.python.daemon.module", WORKER_DAEMON)
    session = (
        builder.appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    return session
