"""How Onceover's jobs get a Spark session."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from onceover.preflight import check_java

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"


def spark_session(app_name: str, master: str | None = None) -> SparkSession:
    """A session on ``master`` (``$ONCEOVER_SPARK_MASTER``, else ``local[2]``), in UTC.

    Checks Java first so a missing or old JDK is one clear line, not a JVM trace.
    """
    check_java()
    # Spark starts Python workers with PYSPARK_PYTHON (or python3 on PATH), not
    # with this interpreter; without it workers miss this environment's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master(
            master or os.environ.get("ONCEOVER_SPARK_MASTER", DEFAULT_MASTER)
        )
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    return session
