"""A job resumed by the launcher onto a standalone Spark cluster lands exactly N rows.

The run crashes locally at ``commit.after``; the control plane, configured like the
Compose stack (``launch_with=spark-submit``, ``spark_master=spark://...``), launches
attempt 2 with ``spark-submit`` to a master and one worker started from PySpark's own
scripts. Its executors run in the worker's JVM and import this project's code from the
``--py-files`` zip the launcher builds. BigQuery then holds N rows with N distinct
keys, counted here, and the master lists the finished application.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from google.cloud import bigquery
from onceover_tools.spark_cluster import SparkCluster

from onceover.bigquery import BigQueryConfig
from tests.backend.conftest import OPERATOR, VIEWER, bearer
from tests.backend.live import post_resume, wait_for_status
from tests.jobs.orders import control_plane, counted_keys, crashed_run, served

pytestmark = pytest.mark.spark

ROWS = 2_000
RESUME_DEADLINE_S = 300.0


def test_a_resume_onto_a_standalone_cluster_writes_exactly_once(
    bq_config: BigQueryConfig, rest: bigquery.Client, dataset: str, tmp_path: Path
) -> None:
    table = f"{dataset}.orders"
    with SparkCluster(tmp_path / "cluster") as cluster:
        app = control_plane(
            bq_config, tmp_path,
            launch_with="spark-submit",
            spark_master=cluster.url,
            spark_submit_args=["--conf", "spark.driver.host=127.0.0.1",
                               "--conf", "spark.executor.memory=512m",
                               "--conf", "spark.cores.max=1"],
        )  # fmt: skip
        with served(app) as url:
            run_id = crashed_run(app, url, bq_config, tmp_path, table, "commit.after", ROWS)

            resumed = post_resume(url, run_id, OPERATOR)
            assert resumed.status_code == 202, resumed.text
            command = resumed.json()["plan"]["command"]
            assert command[command.index("--master") + 1] == cluster.url
            shipped = command[command.index("--py-files") + 1]
            assert Path(shipped).name.startswith("onceover-py-files-")

            def attempt_log() -> str:
                log = httpx.get(f"{url}/api/runs/{run_id}/attempts/2/log?tail=60",
                                headers=bearer(VIEWER)).json()  # fmt: skip
                return "\n".join(log.get("lines", []))

            body = wait_for_status(
                url, VIEWER, run_id, "succeeded", RESUME_DEADLINE_S, seen=attempt_log
            )

        finished = cluster.state()["completedapps"]
        workers = cluster.state()["workers"]

    assert counted_keys(rest, table) == (ROWS, ROWS)  # BigQuery's own count
    assert body["rows_committed"] == ROWS
    assert [a["status"] for a in body["attempts"]] == ["failed", "succeeded"]
    # The resume ran on the cluster: the master saw its application to the end, and
    # the only worker gave it its executor.
    assert len(finished) == 1, finished
    assert finished[0]["state"] == "FINISHED"
    assert len(workers) == 1
